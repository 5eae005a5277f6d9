import type { Selectable } from "kysely";
import { sql } from "kysely";
import { ProviderError, type SenderCredentials } from "../channel/provider.ts";
import { isSealed, open, SEALED_PREFIX, SecretBoxError, seal } from "../crypto/secret-box.ts";
import type { Db } from "../db/connect.ts";
import type { SendersTable } from "../db/schema.ts";
import { findTenantRow } from "../db/tenant-row.ts";
import { unsent } from "../db/unsent.ts";
import { newId } from "../ids.ts";

export type SenderRow = Selectable<SendersTable>;

export interface NewSender {
  tenantId: string;
  /** E.164. */
  phoneNumber: string;
  providerPhoneNumberId: string;
  wabaId: string;
  accessToken: string;
  name?: string | null;
  /** Messages per second (the send workers' pace for this number); default 80. */
  mps?: number;
}

/** `tokenKey`: PROVIDER_TOKEN_KEY; the access token is stored sealed with it, bound to the row's id. */
export async function insertSender(db: Db, tokenKey: Buffer, input: NewSender): Promise<SenderRow> {
  const id = newId("snd");
  return db
    .insertInto("senders")
    .values({
      id,
      tenant_id: input.tenantId,
      name: input.name ?? null,
      phone_number: input.phoneNumber,
      provider_phone_number_id: input.providerPhoneNumberId,
      waba_id: input.wabaId,
      access_token: seal(tokenKey, input.accessToken, id),
      ...(input.mps !== undefined && { mps: input.mps }),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function findSender(db: Db, tenantId: string, senderId: string): Promise<SenderRow | undefined> {
  return findTenantRow(db, "senders", tenantId, senderId);
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

/** A tenant's senders, oldest first: the query the lists below narrow. */
function tenantSenders(db: Db, tenantId: string) {
  return db
    .selectFrom("senders")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .orderBy("created_at")
    .orderBy("id");
}

export async function listActiveSenders(db: Db, tenantId: string): Promise<SenderRow[]> {
  return tenantSenders(db, tenantId).where("active", "=", true).execute();
}

/** Counting stops here: a backlog this long drains in hours either way, and the count stays cheap. */
export const BACKLOG_COUNT_CAP = 1_000_000;

/**
 * Each sender's backlog (DESIGN §13): its accepted messages not yet handed to the provider, retries
 * included, counted on the index of unsent messages (sql/009, src/db/unsent.ts).
 */
export async function senderBacklogs(
  db: Db,
  tenantId: string,
  senderIds: readonly string[],
): Promise<Map<string, number>> {
  if (senderIds.length === 0) return new Map();
  const result = await sql<{ sender_id: string; backlog: number }>`
    SELECT s.id AS sender_id, b.backlog
    FROM unnest(${senderIds}::text[]) AS s(id)
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS backlog FROM (
        SELECT 1 FROM messages m
        WHERE m.sender_id = s.id AND m.tenant_id = ${tenantId} AND ${unsent("m")} AND m.status = 'accepted'
        LIMIT ${BACKLOG_COUNT_CAP}
      ) capped
    ) b`.execute(db);
  return new Map(result.rows.map((row) => [row.sender_id, row.backlog]));
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
  return tenantSenders(db, tenantId).execute();
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

/**
 * The sender's credentials at the provider: the one place a stored access token is opened. A value
 * without the `v1:` prefix is a token stored before encryption, used as it is (`sender
 * encrypt-tokens` seals those). One that does not open (another PROVIDER_TOKEN_KEY, an altered or
 * copied row) is a permanent `provider_auth_failed`: no retry can mend it, a new token can.
 */
export function senderCredentials(
  tokenKey: Buffer,
  sender: Pick<SenderRow, "id" | "provider_phone_number_id" | "waba_id" | "access_token">,
): SenderCredentials {
  let accessToken = sender.access_token;
  if (isSealed(accessToken)) {
    try {
      accessToken = open(tokenKey, accessToken, sender.id);
    } catch (error) {
      if (!(error instanceof SecretBoxError)) throw error;
      throw new ProviderError({
        code: "provider_auth_failed",
        message: `The stored access token of sender ${sender.id} cannot be decrypted with PROVIDER_TOKEN_KEY; register the sender's token again.`,
        retryable: false,
      });
    }
  }
  return { phoneNumberId: sender.provider_phone_number_id, wabaId: sender.waba_id, accessToken };
}

/**
 * Seals every access token still stored in plaintext (from before encryption at rest); returns how
 * many. A row changed meanwhile is left for the next run (the update checks the old value).
 */
export async function sealPlaintextAccessTokens(db: Db, tokenKey: Buffer): Promise<number> {
  const plaintext = await db
    .selectFrom("senders")
    .select(["id", "access_token"])
    .where("access_token", "not like", `${SEALED_PREFIX}%`)
    .execute();
  let sealed = 0;
  for (const row of plaintext) {
    const result = await db
      .updateTable("senders")
      .set({ access_token: seal(tokenKey, row.access_token, row.id) })
      .where("id", "=", row.id)
      .where("access_token", "=", row.access_token)
      .executeTakeFirst();
    sealed += Number(result.numUpdatedRows);
  }
  return sealed;
}
