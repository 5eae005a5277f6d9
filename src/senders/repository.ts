import type { Selectable } from "kysely";
import type { SenderCredentials } from "../channel/provider.ts";
import type { Db } from "../db/connect.ts";
import type { SendersTable } from "../db/schema.ts";
import { newId } from "../ids.ts";

export type SenderRow = Selectable<SendersTable>;

export async function insertSender(
  db: Db,
  input: {
    tenantId: string;
    phoneNumber: string;
    providerPhoneNumberId: string;
    wabaId: string;
    accessToken: string;
    name?: string | null;
  },
): Promise<SenderRow> {
  return db
    .insertInto("senders")
    .values({
      id: newId("snd"),
      tenant_id: input.tenantId,
      name: input.name ?? null,
      phone_number: input.phoneNumber,
      provider_phone_number_id: input.providerPhoneNumberId,
      waba_id: input.wabaId,
      access_token: input.accessToken,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findSender(db: Db, tenantId: string, senderId: string): Promise<SenderRow | undefined> {
  return db
    .selectFrom("senders")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("id", "=", senderId)
    .executeTakeFirst();
}

/** The webhook's lookup: the provider's phone-number id is what tells us the tenant. */
export async function findSenderByProviderPhoneNumberId(
  db: Db,
  phoneNumberId: string,
): Promise<SenderRow | undefined> {
  return db
    .selectFrom("senders")
    .selectAll()
    .where("provider_phone_number_id", "=", phoneNumberId)
    .executeTakeFirst();
}

export async function listActiveSenders(db: Db, tenantId: string): Promise<SenderRow[]> {
  return db
    .selectFrom("senders")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("active", "=", true)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
}

export async function setSenderActive(
  db: Db,
  senderId: string,
  active: boolean,
): Promise<SenderRow | undefined> {
  return db
    .updateTable("senders")
    .set({ active })
    .where("id", "=", senderId)
    .returningAll()
    .executeTakeFirst();
}

/** All of a tenant's senders, active or not, oldest first. */
export async function listTenantSenders(db: Db, tenantId: string): Promise<SenderRow[]> {
  return db
    .selectFrom("senders")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
}

/** Every active sender of every tenant (the template sync job walks them). */
export async function listAllActiveSenders(db: Db): Promise<SenderRow[]> {
  return db.selectFrom("senders").selectAll().where("active", "=", true).orderBy("id").execute();
}

/** An operator's lookup by id alone (CLI); API paths use findSender, which is scoped by tenant. */
export async function findSenderById(db: Db, senderId: string): Promise<SenderRow | undefined> {
  return db.selectFrom("senders").selectAll().where("id", "=", senderId).executeTakeFirst();
}

export async function setTemplatesSyncedAt(
  db: Db,
  tenantId: string,
  senderId: string,
  at: Date,
): Promise<SenderRow> {
  return db
    .updateTable("senders")
    .set({ templates_synced_at: at })
    .where("tenant_id", "=", tenantId)
    .where("id", "=", senderId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The sender's credentials at the provider. */
export function senderCredentials(sender: SenderRow): SenderCredentials {
  return {
    phoneNumberId: sender.provider_phone_number_id,
    wabaId: sender.waba_id,
    accessToken: sender.access_token,
  };
}
