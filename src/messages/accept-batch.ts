import { sql } from "kysely";
import { touchConversations } from "../conversations/summary.ts";
import type { Db } from "../db/connect.ts";
import { isDependencyDown } from "../http/dependency-faults.ts";
import { newId } from "../ids.ts";
import type { Logger } from "../logger.ts";
import { IDEMPOTENCY_RETENTION_MS } from "./idempotency.ts";

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
  idempotency?: { key: string; fingerprint: Buffer };
}

export type AcceptCommit =
  | { kind: "committed"; contactId: string }
  /** A live idempotency record for this key exists: the caller replays it. */
  | { kind: "idempotency-taken" };

const keyOf = (...parts: string[]) => parts.join("\u0000");

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
      const written = await trx
        .insertInto("idempotency_keys")
        .values(
          [...claimed.values()].sort().map((i) => {
            const row = rows[i]!;
            return {
              application_id: row.clientId,
              key: row.idempotency!.key,
              tenant_id: row.tenantId,
              request_hash: row.idempotency!.fingerprint,
              message_id: row.messageId,
              created_at: row.createdAt,
            };
          }),
        )
        .onConflict((oc) =>
          oc
            .columns(["application_id", "key"])
            .doUpdateSet({
              request_hash: (eb) => eb.ref("excluded.request_hash"),
              message_id: (eb) => eb.ref("excluded.message_id"),
              created_at: (eb) => eb.ref("excluded.created_at"),
              tenant_id: (eb) => eb.ref("excluded.tenant_id"),
            })
            // Only a record past its 24 hours may be taken over.
            .where("idempotency_keys.created_at", "<", expired),
        )
        .returning(["application_id", "key"])
        .execute();
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
      const contacts = await trx
        .insertInto("contacts")
        .values(
          [...wanted.entries()]
            .sort(([a], [b]) => (a < b ? -1 : 1))
            .map(([, c]) => ({ id: newId("ctc"), tenant_id: c.tenantId, phone: c.phone, name: c.name })),
        )
        .onConflict((oc) =>
          // Known already (or created a moment ago by a twin): use it, and name it if it has no name.
          oc
            .columns(["tenant_id", "channel", "phone"])
            .doUpdateSet({ name: sql`COALESCE(contacts.name, excluded.name)` }),
        )
        .returning(["id", "tenant_id", "phone"])
        .execute();
      for (const c of contacts) contactIds.set(keyOf(c.tenant_id, c.phone), c.id);
    }

    const inserted = await trx
      .insertInto("messages")
      .values(
        live.map(({ row }) => ({
          id: row.messageId,
          tenant_id: row.tenantId,
          contact_id: row.contactId ?? contactIds.get(keyOf(row.tenantId, row.phone))!,
          sender_id: row.senderId,
          direction: "outbound" as const,
          type: row.type,
          preview: row.text,
          text: row.text,
          media_type: row.mediaType,
          media_filename: row.mediaFilename,
          status: "accepted",
          application_id: row.clientId,
          content: row.content,
          created_at: row.createdAt,
        })),
      )
      .returning(["id", "seq", "contact_id", "tenant_id", "created_at"])
      .execute();

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
    await trx
      .insertInto("feed_pending")
      .values(inserted.map((m) => ({ message_id: m.id!, tenant_id: m.tenant_id })))
      .execute();

    const contactOf = new Map(inserted.map((m) => [m.id!, m.contact_id]));
    for (const { row, i } of live)
      outcome[i] = { kind: "committed", contactId: contactOf.get(row.messageId)! };
    return outcome as AcceptCommit[];
  });
}

interface Waiting {
  row: AcceptRow;
  resolve(commit: AcceptCommit): void;
  reject(error: unknown): void;
}

/**
 * Queues rows for commitAcceptBatch: whatever arrives while a transaction runs goes into the next
 * one. `afterCommit` runs once per batch with the committed rows (enqueueing their send jobs).
 */
export function createAcceptBatcher(
  db: Db,
  logger: Logger,
  afterCommit: (committed: AcceptRow[]) => Promise<void>,
  maxBatch = 250,
  /** Transactions in flight at once: one gathers while others commit. */
  parallel = 3,
) {
  const waiting: Waiting[] = [];
  let draining = 0;

  async function commit(batch: Waiting[]) {
    const results = await commitAcceptBatch(
      db,
      batch.map((w) => w.row),
    );
    // Committed is committed: a failure after this point must not send the batch round again.
    await afterCommit(batch.filter((_, i) => results[i]!.kind === "committed").map((w) => w.row)).catch(
      (error: Error) =>
        logger.warn({ err: error.message }, "after-commit step failed; the sweeper covers it"),
    );
    for (const [i, w] of batch.entries()) w.resolve(results[i]!);
  }

  async function drain() {
    while (waiting.length > 0) {
      const batch = waiting.splice(0, maxBatch);
      try {
        await commit(batch);
      } catch (error) {
        // Postgres away fails every row alike, and a commit cut off mid-way may have happened:
        // each request answers 503 and its client retries (with its Idempotency-Key, a replay).
        if (batch.length === 1 || isDependencyDown(error)) {
          for (const waiting of batch) waiting.reject(error);
          continue;
        }
        // One bad row must not fail its neighbours: commit them one by one.
        logger.warn(
          { size: batch.length, err: (error as Error).message },
          "accept batch failed; committing rows singly",
        );
        for (const single of batch) await commit([single]).catch((e: unknown) => single.reject(e));
      }
    }
    draining--;
  }

  return function submit(row: AcceptRow): Promise<AcceptCommit> {
    return new Promise((resolve, reject) => {
      waiting.push({ row, resolve, reject });
      if (draining < parallel) {
        draining++;
        // Requests arriving in the same tick share the transaction too.
        queueMicrotask(() => void drain());
      }
    });
  };
}
