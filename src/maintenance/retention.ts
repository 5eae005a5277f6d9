/**
 * Message retention (issue 25): each tenant's messages older than its `message_retention_days`
 * disappear with their feed entries, their raw inbound payloads, their events and the conversations
 * they were the last word of. Work is bounded: one short statement per batch of the tenant's oldest
 * rows (an index range, never a table-wide delete), a time budget per pass, and the next pass of the
 * maintenance loop picks up where this one stopped.
 *
 * Kept whatever their age: an outbound message not yet sent or failed, and a scheduled one (never a
 * lost message); contacts (their opt-out outlives their messages). Readers behave as documented
 * across the removed range: feed and event cursors are positions, so a cursor older than retention
 * reads on from the oldest retained entry; a conversation whose last message is gone leaves the list.
 */
import { sql } from "kysely";
import { DAY_MS } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { unsent } from "../db/unsent.ts";

/** Rows per statement: a transaction of milliseconds, a bounded set of row locks. */
export const RETENTION_BATCH = 2_000;

export interface RetentionResult {
  messages: number;
  events: number;
  conversations: number;
  /** False when the time budget ran out first; the next pass goes on. */
  done: boolean;
}

/** A tenant's retention boundary: what was created before it goes. */
function retentionCutoff(now: Date, retentionDays: number): Date {
  return new Date(now.getTime() - retentionDays * DAY_MS);
}

export async function applyMessageRetention(
  db: Db,
  now: Date,
  options: { budgetMs?: number; batch?: number } = {},
): Promise<RetentionResult> {
  const batch = options.batch ?? RETENTION_BATCH;
  const deadline = performance.now() + (options.budgetMs ?? 10_000);
  const result: RetentionResult = { messages: 0, events: 0, conversations: 0, done: true };
  const tenants = await db.selectFrom("tenants").select(["id", "message_retention_days"]).execute();
  for (const tenant of tenants) {
    const cutoff = retentionCutoff(now, tenant.message_retention_days);
    for (const step of [deleteOldMessages, deleteOldEvents, deleteEndedConversations]) {
      for (;;) {
        if (performance.now() > deadline) return { ...result, done: false };
        const removed = await step.run(db, tenant.id, cutoff, batch);
        result[step.counts] += removed;
        if (removed < batch) break;
      }
    }
  }
  return result;
}

interface RetentionStep {
  counts: "messages" | "events" | "conversations";
  run(db: Db, tenantId: string, cutoff: Date, batch: number): Promise<number>;
}

/**
 * The tenant's oldest messages (messages_tenant_created_idx), with their feed entries and, for
 * inbound ones, the provider's payload they were finalized from. A row another transaction holds
 * (a status being applied) is skipped and taken by a later pass.
 */
const deleteOldMessages: RetentionStep = {
  counts: "messages",
  async run(db, tenantId, cutoff, batch) {
    const { rows } = await sql<{ n: number }>`
      WITH doomed AS (
        SELECT m.seq, m.id, m.direction, m.provider_message_id FROM messages m
        WHERE m.tenant_id = ${tenantId} AND m.created_at < ${cutoff}
          AND NOT (${unsent("m")}) AND m.parked IS DISTINCT FROM 'scheduled'
        ORDER BY m.created_at
        LIMIT ${batch}
        FOR UPDATE SKIP LOCKED
      ), feed AS (
        DELETE FROM feed_entries f USING doomed d WHERE f.message_id = d.id
      ), payloads AS (
        DELETE FROM inbound_events i USING doomed d
        WHERE d.direction = 'inbound' AND i.provider_message_id = d.provider_message_id
      ), gone AS (
        DELETE FROM messages m USING doomed d WHERE m.seq = d.seq RETURNING 1
      )
      SELECT count(*)::int AS n FROM gone`.execute(db);
    return rows[0]?.n ?? 0;
  },
};

/**
 * The tenant's events older than the cutoff (all events also go after 30 days, src/events). Positions
 * grow with time, so the oldest are the first of the tenant's key range: the oldest one alone is
 * read first (a tenant with nothing to remove costs one index probe a pass), then a statement takes
 * at most a batch of the first ones and removes those past the cutoff.
 */
const deleteOldEvents: RetentionStep = {
  counts: "events",
  async run(db, tenantId, cutoff, batch) {
    const result = await sql`
      DELETE FROM events WHERE tenant_id = ${tenantId}
        AND (SELECT created_at FROM events WHERE tenant_id = ${tenantId} ORDER BY seq LIMIT 1) < ${cutoff}
        AND seq = ANY(ARRAY(SELECT seq FROM events WHERE tenant_id = ${tenantId} ORDER BY seq LIMIT ${batch}))
        AND created_at < ${cutoff}`.execute(db);
    return Number(result.numAffectedRows ?? 0);
  },
};

/** Conversations whose last message is gone (conversations_order_idx: the tenant's quietest first). */
const deleteEndedConversations: RetentionStep = {
  counts: "conversations",
  async run(db, tenantId, cutoff, batch) {
    const result = await sql`
      DELETE FROM conversations WHERE contact_id = ANY(ARRAY(
        SELECT c.contact_id FROM conversations c
        WHERE c.tenant_id = ${tenantId} AND c.last_message_at < ${cutoff}
          AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.seq = c.last_message_seq)
        ORDER BY c.last_message_at
        LIMIT ${batch}
      ))`.execute(db);
    return Number(result.numAffectedRows ?? 0);
  },
};
