import { CompiledQuery, type Transaction } from "kysely";
import { touchConversations } from "../conversations/summary.ts";
import type { Db } from "../db/connect.ts";
import { createGroupCommit } from "../db/group-commit.ts";
import type { Database } from "../db/schema.ts";
import { newId } from "../ids.ts";
import type { Logger } from "../logger.ts";
import type { RedisClient } from "../redis/connect.ts";
import { IDEMPOTENCY_RETENTION_MS, type IdempotencyMarkerTarget, writeDoneMarkers } from "./idempotency.ts";

/**
 * Group commit of accepted sends. Concurrent POST /messages requests queue their validated
 * messages here; one transaction commits everything queued, with one multi-row statement per table
 * (idempotency records, new contacts, messages, conversation summaries, feed hand-off), while the
 * next batch gathers behind it. Under load a transaction carries tens of messages; alone, a
 * request commits at once with no added wait.
 */

export interface AcceptRow {
  messageId: string;
  tenantId: string;
  clientId: string;
  senderId: string;
  /** An existing contact, or the phone number of one to create (named `recipientName`). */
  contactId: string | undefined;
  phone: string;
  recipientName: string | null;
  type: "text" | "template";
  text: string;
  mediaType: string | null;
  mediaFilename: string | null;
  /** JSON of what the send worker sends. */
  content: string;
  createdAt: Date;
  /** `marker`: where the key's done marker goes in Redis, written once the batch committed. */
  idempotency?: { key: string; fingerprint: Buffer; marker?: IdempotencyMarkerTarget };
}

export type AcceptCommit =
  | { kind: "committed"; contactId: string }
  /** A live idempotency record for this key exists: the caller replays it. */
  | { kind: "idempotency-taken" };

const keyOf = (...parts: string[]) => parts.join("\u0000");

// The batch's statements, written once: each takes one array per column (unnest), so its text
// is the same for every batch size and nothing is built per request. Insert order follows the
// arrays (WITH ORDINALITY), which keeps the lock order of sorted rows.
const INSERT_IDEMPOTENCY_KEYS = `
INSERT INTO idempotency_keys (application_id, key, tenant_id, request_hash, message_id, created_at)
SELECT application_id, key, tenant_id, request_hash, message_id, created_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[], $6::timestamptz[])
  WITH ORDINALITY AS r(application_id, key, tenant_id, request_hash, message_id, created_at, n)
ORDER BY n
ON CONFLICT (application_id, key) DO UPDATE SET
  request_hash = excluded.request_hash, message_id = excluded.message_id,
  created_at = excluded.created_at, tenant_id = excluded.tenant_id
  -- Only a record past its 24 hours may be taken over.
  WHERE idempotency_keys.created_at < $7
RETURNING application_id, key`;

// Known already (or created a moment ago by a twin): use it, and name it if it has no name.
const UPSERT_CONTACTS = `
INSERT INTO contacts (id, tenant_id, phone, name)
SELECT id, tenant_id, phone, name
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS r(id, tenant_id, phone, name, n)
ORDER BY n
ON CONFLICT (tenant_id, channel, phone) DO UPDATE SET name = COALESCE(contacts.name, excluded.name)
RETURNING id, tenant_id, phone`;

const INSERT_MESSAGES = `
INSERT INTO messages (id, tenant_id, contact_id, sender_id, direction, type, preview, text, media_type,
  media_filename, status, application_id, content, created_at)
SELECT id, tenant_id, contact_id, sender_id, 'outbound', type, text, text, media_type,
  media_filename, 'accepted', application_id, content::jsonb, created_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
  $8::text[], $9::text[], $10::text[], $11::timestamptz[])
  WITH ORDINALITY AS r(id, tenant_id, contact_id, sender_id, type, text, media_type, media_filename,
    application_id, content, created_at, n)
ORDER BY n
RETURNING id, seq, contact_id, tenant_id, created_at`;

const INSERT_FEED_PENDING = `
INSERT INTO feed_pending (message_id, tenant_id) SELECT * FROM unnest($1::text[], $2::text[])`;

async function run<Row>(trx: Transaction<Database>, text: string, parameters: unknown[]): Promise<Row[]> {
  return (await trx.executeQuery<Row>(CompiledQuery.raw(text, parameters))).rows;
}

export async function commitAcceptBatch(db: Db, rows: readonly AcceptRow[]): Promise<AcceptCommit[]> {
  return db.transaction().execute(async (trx) => {
    const outcome: (AcceptCommit | undefined)[] = rows.map(() => undefined);

    // Idempotency first: a key already taken (by an earlier commit, or a twin in this batch) keeps
    // its message out of every other table.
    const claimed = new Map<string, number>();
    rows.forEach((row, i) => {
      if (!row.idempotency) return;
      const key = keyOf(row.clientId, row.idempotency.key);
      if (claimed.has(key)) outcome[i] = { kind: "idempotency-taken" };
      else claimed.set(key, i);
    });
    if (claimed.size > 0) {
      const expired = new Date(rows[0]!.createdAt.getTime() - IDEMPOTENCY_RETENTION_MS);
      const records = [...claimed.values()].sort().map((i) => rows[i]!);
      const written = await run<{ application_id: string; key: string }>(trx, INSERT_IDEMPOTENCY_KEYS, [
        records.map((row) => row.clientId),
        records.map((row) => row.idempotency!.key),
        records.map((row) => row.tenantId),
        records.map((row) => row.idempotency!.fingerprint),
        records.map((row) => row.messageId),
        records.map((row) => row.createdAt),
        expired,
      ]);
      const recorded = new Set(written.map((w) => keyOf(w.application_id, w.key)));
      for (const [key, i] of claimed) if (!recorded.has(key)) outcome[i] = { kind: "idempotency-taken" };
    }

    const live = rows.flatMap((row, i) => (outcome[i] === undefined ? [{ row, i }] : []));
    if (live.length === 0) return outcome as AcceptCommit[];

    // New contacts, once per (tenant, phone), in a fixed order so concurrent batches lock alike.
    const wanted = new Map<string, { tenantId: string; phone: string; name: string | null }>();
    for (const { row } of live) {
      if (row.contactId) continue;
      const key = keyOf(row.tenantId, row.phone);
      const prior = wanted.get(key);
      wanted.set(key, { tenantId: row.tenantId, phone: row.phone, name: prior?.name ?? row.recipientName });
    }
    const contactIds = new Map<string, string>();
    if (wanted.size > 0) {
      const fresh = [...wanted.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, c]) => c);
      const contacts = await run<{ id: string; tenant_id: string; phone: string }>(trx, UPSERT_CONTACTS, [
        fresh.map(() => newId("ctc")),
        fresh.map((c) => c.tenantId),
        fresh.map((c) => c.phone),
        fresh.map((c) => c.name),
      ]);
      for (const c of contacts) contactIds.set(keyOf(c.tenant_id, c.phone), c.id);
    }

    const messages = live.map(({ row }) => row);
    const inserted = await run<{
      id: string;
      seq: number;
      contact_id: string;
      tenant_id: string;
      created_at: Date;
    }>(trx, INSERT_MESSAGES, [
      messages.map((row) => row.messageId),
      messages.map((row) => row.tenantId),
      messages.map((row) => row.contactId ?? contactIds.get(keyOf(row.tenantId, row.phone))!),
      messages.map((row) => row.senderId),
      messages.map((row) => row.type),
      messages.map((row) => row.text),
      messages.map((row) => row.mediaType),
      messages.map((row) => row.mediaFilename),
      messages.map((row) => row.clientId),
      messages.map((row) => row.content),
      messages.map((row) => row.createdAt),
    ]);

    await touchConversations(
      trx,
      inserted.map((m) => ({
        contactId: m.contact_id,
        tenantId: m.tenant_id,
        messageSeq: m.seq,
        messageAt: m.created_at,
        direction: "outbound" as const,
      })),
    );
    await run(trx, INSERT_FEED_PENDING, [inserted.map((m) => m.id), inserted.map((m) => m.tenant_id)]);

    const contactOf = new Map(inserted.map((m) => [m.id, m.contact_id]));
    for (const { row, i } of live)
      outcome[i] = { kind: "committed", contactId: contactOf.get(row.messageId)! };
    return outcome as AcceptCommit[];
  });
}

function doneMarkersOf(rows: readonly AcceptRow[]) {
  return rows.flatMap((row) =>
    row.idempotency?.marker ? [{ target: row.idempotency.marker, messageId: row.messageId }] : [],
  );
}

/**
 * Queues rows for commitAcceptBatch (src/db/group-commit.ts): whatever arrives while a transaction
 * runs goes into the next one. After the commit, one Redis pipeline marks the batch's
 * Idempotency-Keys done while `afterCommit` runs once per batch with the committed rows (enqueueing
 * their send jobs), before any request of the batch answers.
 */
export function createAcceptBatcher(
  { db, logger, redis }: { db: Db; logger: Logger; redis: RedisClient },
  afterCommit: (committed: AcceptRow[]) => Promise<void>,
) {
  const batcher = createGroupCommit<AcceptRow, AcceptCommit>({
    name: "accept",
    logger,
    commit: (rows) => commitAcceptBatch(db, rows),
    async afterCommit(rows, results) {
      const committed = rows.filter((_, i) => results[i]?.kind === "committed");
      await Promise.all([
        afterCommit(committed),
        // A marker left in flight only delays a retry of its key (409) until it expires.
        writeDoneMarkers(redis, doneMarkersOf(committed)).catch(() => {}),
      ]);
    },
  });
  return (row: AcceptRow): Promise<AcceptCommit> => batcher.submit(row);
}
