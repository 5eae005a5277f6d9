import type { Db } from "../db/connect.ts";
import { createGroupCommit } from "../db/group-commit.ts";
import type { Logger } from "../logger.ts";
import type { RedisClient } from "../redis/connect.ts";
import { IDEMPOTENCY_RETENTION_MS, type IdempotencyMarkerTarget, writeDoneMarkers } from "./idempotency.ts";
import { run, storeMessages } from "./store.ts";

/**
 * Group commit of accepted sends. Concurrent POST /messages requests queue their validated
 * messages here; one transaction commits everything queued, with one multi-row statement per table
 * (idempotency records here, then new contacts, messages, conversation summaries and feed hand-off
 * through the one message writer, store.ts), while the
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

// Written once, like store.ts's statements: one array per column (unnest), inserted in the arrays'
// order (WITH ORDINALITY), which keeps the lock order of sorted rows.
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

    const stored = await storeMessages(
      trx,
      live.map(({ row }) => ({
        id: row.messageId,
        tenantId: row.tenantId,
        senderId: row.senderId,
        direction: "outbound",
        contactId: row.contactId,
        phone: row.phone,
        contactName: row.recipientName,
        windowFrom: null,
        type: row.type,
        preview: row.text,
        text: row.text,
        mediaType: row.mediaType,
        mediaFilename: row.mediaFilename,
        status: "accepted",
        applicationId: row.clientId,
        content: row.content,
        providerMessageId: null,
        createdAt: row.createdAt,
        visible: true,
      })),
    );
    live.forEach(({ i }, n) => {
      outcome[i] = { kind: "committed", contactId: stored[n]!.contactId };
    });
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
