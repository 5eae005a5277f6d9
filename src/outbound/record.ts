import { sql } from "kysely";
import type { Clock } from "../clock.ts";
import { OPTED_OUT_FAILURE, optOutContactsCtes } from "../contacts/opt-out.ts";
import type { Db } from "../db/connect.ts";
import type { MessageFailure } from "../db/schema.ts";

/**
 * The one writer of what became of a send: a provider id (the send's answer, one adopted from the
 * stash or from a status webhook echoing our id), a failure, or a retry. The send worker records a
 * chunk at once; an adoption is a batch of one or many.
 */

/** What became of one message's attempt: one row of the record statement. */
export interface Outcome {
  id: string;
  providerMessageId?: string;
  failure?: MessageFailure;
  /** When a retry is due (epoch ms). */
  notBefore?: number;
  /**
   * A retry's reason, in the failure's shape (`failureOf`, src/channel/provider.ts): kept as the
   * message's last_error (its `retrying.last_error`) until it is sent, adopted or fails for good.
   */
  lastError?: MessageFailure;
  /** The attempt stays in doubt (no answer from the provider). */
  keepStarted?: boolean;
  /** The claim counted an attempt that never reached the provider. */
  refund?: boolean;
  throttled?: boolean;
}

/** A send worker's settled message: its outcome, and its pair (the next message may go after it). */
export interface Settled extends Outcome {
  senderId: string;
  contactId: string;
  outcome: "sent" | "adopted" | "failed" | "retry";
  reason?: Error;
}

/**
 * The record of a batch, one statement: provider ids (`sent`, unless a status got further), failures
 * (`failed` with `failure`; one saying the customer opted out opts the contact out), and retries
 * (send_not_before and last_error, the retry's reason; the attempt settled unless the provider never
 * answered). A message sent, adopted or failed for good has no last_error any more. Only a message
 * without a provider id is changed. Returns the ids it changed.
 */
export async function recordOutcomes(db: Db, clock: Clock, settled: readonly Outcome[]): Promise<Recorded> {
  if (settled.length === 0) return { ids: new Set(), statusesWaiting: [] };
  const now = clock.now();
  const { rows } = await sql<{ id: string; pid: string | null; statuses_waiting: boolean }>`
    WITH recorded AS (
    UPDATE messages m SET
      provider_message_id = v.pid,
      status = CASE
        WHEN v.pid IS NOT NULL AND m.status = 'accepted' THEN 'sent'
        WHEN v.failure IS NOT NULL AND m.status = 'accepted' THEN 'failed'
        ELSE m.status END,
      failure = CASE WHEN v.failure IS NOT NULL THEN v.failure::jsonb ELSE m.failure END,
      send_started_at = CASE WHEN v.keep_started THEN m.send_started_at ELSE NULL END,
      send_not_before = CASE WHEN v.not_before_ms IS NULL THEN NULL
        ELSE to_timestamp(v.not_before_ms / 1000.0) END,
      -- Retrying: this attempt's error (an outcome without one keeps the earlier); else none.
      last_error = CASE WHEN v.not_before_ms IS NULL THEN NULL
        ELSE COALESCE(v.last_error::jsonb, m.last_error) END,
      send_attempts = m.send_attempts - v.refund,
      send_throttled = m.send_throttled + v.throttled,
      updated_at = ${now}
    FROM unnest(
      ${settled.map((s) => s.id)}::text[],
      ${settled.map((s) => s.providerMessageId ?? null)}::text[],
      ${settled.map((s) => (s.failure ? JSON.stringify(s.failure) : null))}::text[],
      ${settled.map((s) => s.notBefore ?? null)}::float8[],
      ${settled.map((s) => s.keepStarted === true)}::bool[],
      ${settled.map((s) => (s.refund ? 1 : 0))}::int[],
      ${settled.map((s) => (s.throttled ? 1 : 0))}::int[],
      ${settled.map((s) => (s.lastError ? JSON.stringify(s.lastError) : null))}::text[]
    ) AS v(id, pid, failure, not_before_ms, keep_started, refund, throttled, last_error)
    WHERE m.id = v.id AND m.direction = 'outbound' AND m.provider_message_id IS NULL
    -- moved: the SET above moved the status (an event). A message without a provider id is accepted,
    -- or failed for good (an adopted id leaves it failed; only an accepted message is claimed and
    -- fails). statuses_waiting: statuses that overtook the send wait for this id (a status stored
    -- after this statement's snapshot nudged a drain when it was stored).
    RETURNING m.id, m.seq, m.tenant_id, m.contact_id, m.status, m.failure, v.pid,
      (v.pid IS NOT NULL AND m.status = 'sent') OR (v.failure IS NOT NULL AND m.status = 'failed') AS moved,
      v.pid IS NOT NULL AND EXISTS (
        SELECT 1 FROM status_events e WHERE e.provider_message_id = v.pid) AS statuses_waiting
    ), emitted AS (
      -- The event log (DESIGN §12, sql/016): sent (the provider took it) or failed for good.
      INSERT INTO event_pending (tenant_id, shard, type, message_id, status, failure)
      SELECT tenant_id, feed_shard_of(tenant_id, (SELECT shards FROM feed_shards)), 'message.' || status,
             id, status, CASE WHEN status = 'failed' THEN failure END
      FROM recorded
      WHERE moved
      ORDER BY seq
    ),
    -- The provider refused the send because the customer opted out (131050, DESIGN §13): so is
    -- the contact, from now.
    ${optOutContactsCtes(
      sql`SELECT contact_id FROM recorded
          WHERE moved AND status = 'failed' AND failure->>'code' = ${OPTED_OUT_FAILURE}`,
      now,
    )}
    SELECT id, pid, statuses_waiting FROM recorded`.execute(db);
  return {
    ids: new Set(rows.map((r) => r.id)),
    statusesWaiting: rows.flatMap((r) => (r.statuses_waiting && r.pid ? [r.pid] : [])),
  };
}

export interface Recorded {
  /** The messages the record changed. */
  ids: Set<string>;
  /** Provider ids just recorded for which status events wait. */
  statusesWaiting: string[];
}
