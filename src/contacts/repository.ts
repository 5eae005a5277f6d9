import type { Selectable } from "kysely";
import { CHANNEL } from "../channel/provider.ts";
import type { Db } from "../db/connect.ts";
import type { ContactsTable } from "../db/schema.ts";

export type ContactRow = Selectable<ContactsTable>;

export async function findContact(
  db: Db,
  tenantId: string,
  contactId: string,
): Promise<ContactRow | undefined> {
  return db
    .selectFrom("contacts")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("id", "=", contactId)
    .executeTakeFirst();
}

/** `phone` must already be E.164 (contacts are stored that way). */
export async function findContactByPhone(
  db: Db,
  tenantId: string,
  phone: string,
): Promise<ContactRow | undefined> {
  return db
    .selectFrom("contacts")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("channel", "=", CHANNEL)
    .where("phone", "=", phone)
    .executeTakeFirst();
}

export async function tenantHasActiveSender(db: Db, tenantId: string): Promise<boolean> {
  const row = await db
    .selectFrom("senders")
    .select("id")
    .where("tenant_id", "=", tenantId)
    .where("active", "=", true)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}
