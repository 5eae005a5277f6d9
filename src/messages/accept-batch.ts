import type { Db } from "../db/connect.ts";
import { createGroupCommit } from "../db/group-commit.ts";
import type { Logger } from "../logger.ts";
import type { RedisClient } from "../redis/connect.ts";
import { IDEMPOTENCY_RETENTION_MS, type IdempotencyMarkerTarget, writeDoneMarkers } from "./idempotency.ts";
import { storeMessages } from "./store.ts";

/**
 * Group commit of accepted sends. Concurrent POST /messages requests queue their validated
 * messages here; ONE statement commits everything queued (idempotency records, new contacts,
 * messages, conversation summaries and feed hand-off, through the one message writer, store.ts),
 * while the
 * next batch gathers behind it. Under load a transaction carries tens of messages; alone, a
 * request commits at once with no added wait.
 */

export interface AcceptRow {
  messageId: string;
  tenantId: string;
  clientId: string;
  senderId: string;
  /** An existing contact, or the phone number or BSUID of one to find or create (named `recipientName`). */
  contactId: string | undefined;
  /** E.164; null for a contact without one (DESIGN §14). */
  phone: string | null;
  /** The BSUID of a send to a user no contact has yet (with a null phone); null otherwise. */
  userId: string | null;
  recipientName: string | null;
  type: "text" | "template";
  text: string;
  mediaType: string | null;
  mediaFilename: string | null;
  /** JSON of what the send worker sends. */
  content: string;
  clientReference: string | null;
  /** A scheduled send (status `scheduled`, DESIGN §13); null = into delivery now. */
  sendAt: Date | null;
  validFor: number | null;
  expiresAt: Date | null;
  createdAt: Date;
  /** `marker`: where the key's done marker goes in Redis, written once the batch committed. */
  idempotency?: { key: string; fingerprint: Buffer; marker?: IdempotencyMarkerTarget };
}

export type AcceptCommit =
  | { kind: "committed"; contactId: string }
  /** A live idempotency record for this key exists: the caller replays it. */
  | { kind: "idempotency-taken" }
  /** The contact opted out (found by the statement, for a send that looked up no contact). */
  | { kind: "opted-out" };

const keyOf = (...parts: string[]) => parts.join("\u0000");

/**
 * One statement, no transaction around it (atomic on its own): the batch's Idempotency-Keys and
 * messages through the one message writer (store.ts). A key taken by a live record, or by a twin
 * earlier in this batch, keeps its message out of every table.
 */
export async function commitAcceptBatch(db: Db, rows: readonly AcceptRow[]): Promise<AcceptCommit[]> {
  const outcome: (AcceptCommit | undefined)[] = rows.map(() => undefined);
  const claimed = new Set<string>();
  rows.forEach((row, i) => {
    if (!row.idempotency) return;
    const key = keyOf(row.clientId, row.idempotency.key);
    if (claimed.has(key)) outcome[i] = { kind: "idempotency-taken" };
    else claimed.add(key);
  });
  const live = rows.flatMap((row, i) => (outcome[i] === undefined ? [{ row, i }] : []));
  if (live.length === 0) return outcome as AcceptCommit[];

  const stored = await storeMessages(
    db,
    live.map(({ row }) => ({
      id: row.messageId,
      tenantId: row.tenantId,
      senderId: row.senderId,
      direction: "outbound",
      contactId: row.contactId,
      phone: row.phone,
      userId: row.userId,
      contactName: row.recipientName,
      windowFrom: null,
      type: row.type,
      preview: row.text,
      text: row.text,
      mediaType: row.mediaType,
      mediaFilename: row.mediaFilename,
      status: row.sendAt ? "scheduled" : "accepted",
      applicationId: row.clientId,
      content: row.content,
      providerMessageId: null,
      clientReference: row.clientReference,
      sendAt: row.sendAt,
      validFor: row.validFor,
      expiresAt: row.expiresAt,
      createdAt: row.createdAt,
      visible: true,
      idempotency: row.idempotency && {
        key: row.idempotency.key,
        fingerprint: row.idempotency.fingerprint,
      },
    })),
    { idempotencyExpiredBefore: new Date(live[0]!.row.createdAt.getTime() - IDEMPOTENCY_RETENTION_MS) },
  );
  live.forEach(({ i }, n) => {
    const row = stored[n]!;
    outcome[i] = typeof row === "string" ? { kind: row } : { kind: "committed", contactId: row.contactId };
  });
  return outcome as AcceptCommit[];
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
  afterCommit: (dueNow: AcceptRow[], committed: AcceptRow[]) => Promise<void>,
) {
  const batcher = createGroupCommit<AcceptRow, AcceptCommit>({
    name: "accept",
    logger,
    commit: (rows) => commitAcceptBatch(db, rows),
    async afterCommit(rows, results) {
      const committed = rows.filter((_, i) => results[i]?.kind === "committed");
      const dueNow = committed.filter((row) => row.sendAt === null);
      await Promise.all([
        // Scheduled ones are nudged by the scheduler at their time (src/outbound/scheduler.ts).
        afterCommit(dueNow, committed),
        // A marker left in flight only delays a retry of its key (409) until it expires.
        writeDoneMarkers(redis, doneMarkersOf(committed)).catch(() => {}),
      ]);
    },
  });
  return (row: AcceptRow): Promise<AcceptCommit> => batcher.submit(row);
}
