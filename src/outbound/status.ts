import { type RawBuilder, sql } from "kysely";
import { statusFailure } from "../channel/webhook-events.ts";
import { type Clock, DAY_MS } from "../clock.ts";
import {
  attachStatusRecipients,
  type ProviderIdentity,
  type StatusRecipientRow,
} from "../contacts/identity.ts";
import { OPTED_OUT_FAILURE, optOutContactsCtes } from "../contacts/opt-out.ts";
import type { Expiry } from "../db/batched-delete.ts";
import type { Db } from "../db/connect.ts";
import { unsent } from "../db/unsent.ts";
import { echoLookup } from "./in-doubt.ts";
import { recordOutcomes } from "./record.ts";

/**
 * Message status moves forward only (DESIGN §3): accepted -> sent -> delivered -> read, skips
 * allowed; failed only from accepted or sent; a later delivered/read supersedes failed; anything
 * else (out-of-order webhooks) is ignored. The rule is defined once, in SQL
 * (`message_status_after` and `message_status_fold`, sql/014; `message_status_steps`, sql/016, its
 * running form for the event log), and applied by the statements built
 * on `statusStatementHead` below, the webhook store's and the drain's alike.
 */

/** A status event as `statusStatementHead` takes it, from a webhook or from the backlog. */
export interface StatusEventInput {
  providerMessageId: string;
  status: string;
  at: Date;
  /** The wire's `errors`, as JSON text (kept with an event that waits; a failure is read from it). */
  errors: string | null;
  clientReference: string | null;
  /** The sender whose phone_number_id the webhook named (null: stored before events carried one). */
  senderId: string | null;
  /** Tie-break after `at`: arrival order (a webhook batch's own order, or a stored event's id). */
  order: number;
  /** Who the provider says received it (DESIGN §14); null fields when it did not say. */
  recipient: StatusRecipient;
}

/** The recipient a status names: its phone when shared, its BSUID and parent BSUID. */
export type StatusRecipient = Pick<ProviderIdentity, "phone" | "userId" | "parentUserId">;

/**
 * The common head of the statements that apply statuses: `ev` (the events), `known` (their
 * messages known by provider id), `target` (those an event may move, locked in seq order, the one
 * lock order of every status writer), and `changed` (ONE multi-row update of the messages the
 * events move, folded oldest first through the rule, every status that moved one also an event of
 * the log); a message failed because the customer opted out (131050) opts its contact out. An
 * event of another sender than its message's is settled without effect: a webhook for number B
 * cannot move number A's messages. The caller adds what becomes of the events.
 *
 * `unattached` (read by the webhook store only; an unread CTE costs nothing): the recipients of
 * known messages whose BSUID the message's contact does not carry (DESIGN §14), for
 * attachStatusRecipients once the statement has committed. Rare (the first status of a contact known
 * by phone, or one proving two contacts one person); the common case costs one probe of contacts by
 * id per message.
 *
 * `behindWaiting` (the webhook store): a message that still has events waiting in status_events is
 * left out of `known`, so the new events are stored to wait behind them. Applied directly, a `read`
 * would overtake a waiting `delivered` that a drain holds at that moment, and that `delivered`
 * would then be dropped as out of order, its event with it.
 */
export function statusStatementHead(
  events: readonly StatusEventInput[],
  now: Date,
  { behindWaiting = false }: { behindWaiting?: boolean } = {},
) {
  const failureOf = (e: StatusEventInput) =>
    e.status === "failed"
      ? JSON.stringify(statusFailure(e.errors === null ? null : JSON.parse(e.errors)))
      : null;
  const providerIds = [...new Set(events.map((e) => e.providerMessageId))];
  return sql`
    ev AS (
      SELECT * FROM unnest(
        ${events.map((e) => e.providerMessageId)}::text[],
        ${events.map((e) => e.status)}::text[],
        ${events.map((e) => e.at.toISOString())}::timestamptz[],
        ${events.map((e) => e.errors)}::jsonb[],
        ${events.map(failureOf)}::jsonb[],
        ${events.map((e) => e.clientReference)}::text[],
        ${events.map((e) => e.senderId)}::text[],
        ${events.map((e) => e.order)}::bigint[],
        ${events.map((e) => e.recipient.phone)}::text[],
        ${events.map((e) => e.recipient.userId)}::text[],
        ${events.map((e) => e.recipient.parentUserId)}::text[]
      ) AS v(pid, status, at, errors, failure, client_reference, sender_id, ord,
             recipient_phone, recipient_user_id, recipient_parent_user_id)
    ), found AS MATERIALIZED (
      -- By provider id alone (unique), outbound checked after: with direction in this WHERE the
      -- planner may AND in the index of every outbound message, a scan that grows with the table.
      -- Not locked yet: see target.
      SELECT m.seq, m.provider_message_id, m.status, m.direction, m.tenant_id, m.contact_id, m.sender_id
      FROM messages m
      WHERE m.provider_message_id = ANY(${providerIds}::text[])
    ), known AS (
      SELECT f.seq, f.provider_message_id, f.status, f.tenant_id, f.contact_id, f.sender_id
      FROM found f WHERE f.direction = 'outbound'
      ${
        behindWaiting
          ? sql`-- A message with statuses still waiting (a drain may hold them right now) is not
                -- moved past them: the new events wait as well and the drain folds them in after.
                AND NOT EXISTS (SELECT 1 FROM status_events s WHERE s.provider_message_id = f.provider_message_id)`
          : sql``
      }
    ), target AS MATERIALIZED (
      -- Locked, in seq order, only where an event may move the message. A status moves forward
      -- only, so an event that cannot move the status read above cannot move a later one either:
      -- such a message (a sent after the send record: a third of the status webhooks) is known,
      -- its events settle without effect, and it is neither locked nor written. By seq, not by
      -- tuple id: the lock follows a row updated meanwhile to its newest version, whose status the
      -- fold starts from, and re-checked there an old tuple id would no longer match.
      SELECT m.seq, m.id, m.tenant_id, m.contact_id, m.provider_message_id, m.sender_id, m.status, m.failure
      FROM messages m
      WHERE m.seq = ANY(ARRAY(
        SELECT k.seq FROM known k
        WHERE EXISTS (SELECT 1 FROM ev e
                      WHERE e.pid = k.provider_message_id AND message_status_after(k.status, e.status) IS NOT NULL)
      ))
      ORDER BY m.seq
      FOR UPDATE
    ), unattached AS (
      -- From each known message to its contact by primary key (a nested loop: one probe per
      -- message), compared before anything is grouped: only the rare mismatches are made distinct.
      ${unattachedRecipients(sql`
        FROM known k
        JOIN contacts c ON c.id = k.contact_id
        JOIN ev e ON e.pid = k.provider_message_id`)}
    ), grouped AS (
      SELECT k.seq, k.id, k.tenant_id, k.contact_id, k.status, k.failure,
             array_agg(e.status ORDER BY e.at, e.ord) AS statuses,
             array_agg(e.failure ORDER BY e.at, e.ord) AS failures
      FROM target k
      JOIN ev e ON e.pid = k.provider_message_id
               AND (e.sender_id IS NULL OR e.sender_id = k.sender_id)
      GROUP BY k.seq, k.id, k.tenant_id, k.contact_id, k.status, k.failure
    ), folded AS (
      SELECT g.seq, g.contact_id, g.status AS was, f.status, f.failure
      FROM grouped g, LATERAL message_status_fold(g.status, g.failure, g.statuses, g.failures) f
    ), changed AS (
      UPDATE messages m SET status = f.status, failure = f.failure, updated_at = ${now}
      FROM folded f
      WHERE m.seq = f.seq AND f.status IS DISTINCT FROM f.was
      RETURNING 1
    ), emitted AS (
      -- The event log (DESIGN §12, sql/016): one event per status that moved a message, in order.
      INSERT INTO event_pending (tenant_id, shard, type, message_id, status, failure)
      SELECT g.tenant_id, feed_shard_of(g.tenant_id, (SELECT shards FROM feed_shards)),
             'message.' || s.reached, g.id, s.reached, s.failure
      FROM grouped g, LATERAL message_status_steps(g.status, g.statuses, g.failures) s
      ORDER BY g.seq, s.step
    ),
    -- A message the batch failed because the customer opted out (131050, DESIGN §13): so is its
    -- contact, from now; locked after the messages.
    ${optOutContactsCtes(
      sql`SELECT contact_id FROM folded
          WHERE status = 'failed' AND was IS DISTINCT FROM 'failed' AND failure->>'code' = ${OPTED_OUT_FAILURE}`,
      now,
    )}`;
}

/**
 * Which statuses' recipients their message's contact does not carry yet (DESIGN §14), as
 * StatusRecipientRow: the one rule of the webhook store's `unattached` and attachClaimedRecipients.
 * `from` joins `e` (events: pid, sender_id, recipient_phone, recipient_user_id,
 * recipient_parent_user_id) to `k` (their outbound messages) and `c` (those messages' contacts).
 * An event of another sender than its message's attaches nothing, as it moves nothing.
 */
function unattachedRecipients(from: RawBuilder<unknown>): RawBuilder<StatusRecipientRow> {
  return sql<StatusRecipientRow>`
    SELECT DISTINCT k.tenant_id, c.phone AS contact_phone, c.user_id AS contact_user_id,
           e.recipient_phone AS phone, e.recipient_user_id AS user_id,
           e.recipient_parent_user_id AS parent_user_id
    ${from}
    WHERE (e.sender_id IS NULL OR e.sender_id = k.sender_id)
      AND ((e.recipient_user_id IS NOT NULL AND c.user_id IS DISTINCT FROM e.recipient_user_id)
           OR (c.phone IS NULL AND e.recipient_phone IS NOT NULL))`;
}

/**
 * Provider ids learned after the send (from the stash, or a status webhook echoing our id): recorded
 * by the one writer of send outcomes (record.ts), `sent` unless a status got further already; a
 * message that has an id already is left alone. Returns how many were recorded.
 */
export async function adoptProviderIds(
  db: Db,
  clock: Clock,
  adoptions: readonly { messageId: string; providerMessageId: string }[],
): Promise<number> {
  const { ids } = await recordOutcomes(
    db,
    clock,
    adoptions.map((a) => ({ id: a.messageId, providerMessageId: a.providerMessageId })),
  );
  return ids.size;
}

/** Events one status transaction takes at most: 500 messages' sent, delivered and read, and more. */
export const STATUS_BATCH_SIZE = 2000;

interface ClaimedEvent {
  id: number;
  provider_message_id: string;
  status: string;
  errors: unknown[] | null;
  sender_id: string | null;
  provider_timestamp: Date;
  recipient_phone: string | null;
  recipient_user_id: string | null;
  recipient_parent_user_id: string | null;
}

/** What one batch (one transaction) did. */
export interface StatusBatch {
  /** Events taken (locked) by this batch. */
  claimed: number;
  /** Events settled (applied, then deleted): with effect, ignored as out of order, or of another sender. */
  applied: number;
  /** Messages whose status changed. */
  messages: number;
  /** Messages in doubt whose provider id was adopted from an echo of our id. */
  adopted: number;
}

/** What a drain did, and in how many transactions. */
export interface StatusDrain extends Omit<StatusBatch, "claimed"> {
  batches: number;
}

/**
 * Applies every unapplied status event of the given provider message ids, in one transaction (the
 * send worker, once it has recorded a chunk's ids). Events for a message we do not know yet stay
 * unapplied until it appears (a status can overtake the send response); the send worker and the
 * drain apply them then.
 *
 * An event moves only a message of the sender whose phone_number_id its webhook named: a webhook
 * for number B cannot move number A's messages, by provider id or by our echoed id. Such an event
 * is settled without effect. Events stored before they carried a sender apply as they always did.
 */
export async function applyStatusEvents(
  db: Db,
  clock: Clock,
  providerMessageIds: string | readonly string[],
): Promise<number> {
  const ids =
    typeof providerMessageIds === "string" ? [providerMessageIds] : [...new Set(providerMessageIds)];
  if (ids.length === 0) return 0;
  return db.transaction().execute(async (trx) => {
    // Events before the messages, like the drain (which takes events with SKIP LOCKED, then
    // messages): the one lock order keeps the two from deadlocking.
    const events = await trx
      .selectFrom("status_events")
      .select([
        "id",
        "provider_message_id",
        "status",
        "errors",
        "sender_id",
        "provider_timestamp",
        "recipient_phone",
        "recipient_user_id",
        "recipient_parent_user_id",
      ])
      .where("provider_message_id", "in", ids)
      .orderBy("id")
      .forUpdate()
      .execute();
    if (events.length === 0) return 0;
    const named = [...new Set(events.map((e) => e.provider_message_id))];
    const known = await trx
      .selectFrom("messages")
      .select("provider_message_id")
      .where("provider_message_id", "in", named)
      .where("direction", "=", "outbound")
      .execute();
    const knownIds = new Set(known.map((m) => m.provider_message_id));
    for (const id of named) if (!knownIds.has(id)) await adoptEchoOf(trx, clock, id);
    // applyClaimed leaves the events of a message still unknown as they are.
    return (await applyClaimed(trx, clock, events)).applied;
  });
}

/**
 * Not known by this id yet. If the send echoed our message id back (biz_opaque_callback_data),
 * the send worker never learned the provider's id (crash, timeout): adopt it now.
 */
async function adoptEchoOf(trx: Db, clock: Clock, providerMessageId: string): Promise<boolean> {
  const {
    rows: [echo],
  } = await sql<{ id: string }>`
    ${echoLookup(sql`e.provider_message_id = ${providerMessageId}`)}
    LIMIT 1`.execute(trx);
  if (!echo) return false;
  return (await adoptProviderIds(trx, clock, [{ messageId: echo.id, providerMessageId }])) > 0;
}

/**
 * One transaction over the backlog: adopts echoed provider ids of sends in doubt, takes up to
 * `limit` unapplied events of known messages (oldest first, SKIP LOCKED: concurrent drains share
 * the backlog, never wait on each other, never take an event twice), and applies them with one
 * multi-row update of messages and one of the events. Events whose message is not known stay
 * pending and are not taken, so a drain ends.
 */
export async function applyPendingStatusEvents(
  db: Db,
  clock: Clock,
  limit = STATUS_BATCH_SIZE,
): Promise<StatusBatch> {
  return db.transaction().execute(async (trx) => {
    const adopted = await adoptEchoedProviderIds(trx, clock);
    const { rows: events } = await sql<ClaimedEvent>`
      SELECT e.id, e.provider_message_id, e.status, e.errors, e.sender_id, e.provider_timestamp,
             e.recipient_phone, e.recipient_user_id, e.recipient_parent_user_id
      FROM status_events e
      -- A scalar subquery, not EXISTS: it stays one index probe per unapplied event. As a semi
      -- join the planner may hash every outbound message instead, a cost that grows with the
      -- table, not the backlog (provider ids are unique, so it returns one row at most).
      WHERE (SELECT m.direction FROM messages m
             WHERE m.provider_message_id = e.provider_message_id) = 'outbound'
      ORDER BY e.id
      LIMIT ${limit}
      FOR UPDATE OF e SKIP LOCKED`.execute(trx);
    const applied = await applyClaimed(trx, clock, events);
    return { claimed: events.length, adopted, ...applied };
  });
}

/** Batches until one comes back short: the backlog this caller could see is applied. */
export async function drainStatusEvents(
  db: Db,
  clock: Clock,
  limit = STATUS_BATCH_SIZE,
): Promise<StatusDrain> {
  const total: StatusDrain = { applied: 0, messages: 0, adopted: 0, batches: 0 };
  for (;;) {
    const batch = await applyPendingStatusEvents(db, clock, limit);
    total.batches++;
    total.applied += batch.applied;
    total.messages += batch.messages;
    total.adopted += batch.adopted;
    if (batch.claimed < limit) return total;
  }
}

/**
 * The batch form of adoptEchoOf: every message still without a provider id for which an unapplied
 * event (of its own sender) echoes our id gets that event's provider id (found and locked by one
 * statement, recorded by another). A message another transaction holds is skipped (the send worker
 * recording it, another drain adopting it).
 */
async function adoptEchoedProviderIds(trx: Db, clock: Clock): Promise<number> {
  const { rows } = await sql<{ id: string; provider_message_id: string }>`
    WITH unsent AS MATERIALIZED (
      -- Driven from the messages not yet sent (few, through the partial index of unsent
      -- messages), not from every unapplied event, which under load is most of the recent
      -- traffic and would make each drain cost as much as the backlog.
      SELECT m.id FROM messages m
      WHERE ${unsent("m")} AND m.status = 'accepted'
    ), echo AS MATERIALIZED (
      -- Their events, by client_reference alone: an array, so that its index is used (a join on
      -- m.id would compare in m.id's collation, "C", which that index is not in).
      SELECT e.id, e.client_reference COLLATE "C" AS client_reference, e.provider_message_id, e.sender_id
      FROM status_events e
      WHERE e.client_reference IS NOT NULL
        AND e.client_reference = ANY(ARRAY(SELECT id COLLATE "default" FROM unsent))
    ), candidate AS (
      -- Back to the message by its id (its unique index), each echo found above being of one: the
      -- echo lookup over them, of a provider id no message has yet.
      ${echoLookup(
        sql`NOT EXISTS (SELECT 1 FROM messages k WHERE k.provider_message_id = e.provider_message_id)`,
        sql`echo`,
      )}
    ), adoption AS (
      -- A provider id names one message (unique index): the first message claiming it.
      SELECT DISTINCT ON (provider_message_id) id, provider_message_id
      FROM candidate ORDER BY provider_message_id, id
    )
    -- Locked here (SKIP LOCKED: the send worker recording it, another drain adopting it), then
    -- recorded by the one writer of provider ids.
    SELECT m.id, a.provider_message_id FROM messages m JOIN adoption a ON a.id = m.id
    WHERE m.provider_message_id IS NULL
    ORDER BY m.id
    FOR UPDATE OF m SKIP LOCKED`.execute(trx);
  return adoptProviderIds(
    trx,
    clock,
    rows.map((r) => ({ messageId: r.id, providerMessageId: r.provider_message_id })),
  );
}

/**
 * The recipients of claimed events that their message's contact does not carry (unattachedRecipients,
 * the webhook store's `unattached` rule), attached before the events are applied: in the drain's
 * transaction, so a drain killed in between leaves the events to the next one, and before the
 * messages are locked, so the drain takes its locks in the identity module's order (advisory locks,
 * contacts, messages) like inbound finalize, and a merge and a drain cannot deadlock. One statement
 * per batch (none when no event names a recipient); the common case costs one probe of messages and
 * of contacts per event.
 */
async function attachClaimedRecipients(trx: Db, events: readonly ClaimedEvent[]): Promise<void> {
  const named = events.filter((e) => e.recipient_user_id !== null || e.recipient_phone !== null);
  if (named.length === 0) return;
  const { rows } = await unattachedRecipients(sql`
    FROM unnest(${named.map((e) => e.provider_message_id)}::text[], ${named.map((e) => e.sender_id)}::text[],
                ${named.map((e) => e.recipient_phone)}::text[], ${named.map((e) => e.recipient_user_id)}::text[],
                ${named.map((e) => e.recipient_parent_user_id)}::text[])
      AS e(pid, sender_id, recipient_phone, recipient_user_id, recipient_parent_user_id)
    JOIN messages k ON k.provider_message_id = e.pid AND k.direction = 'outbound'
    JOIN contacts c ON c.id = k.contact_id`).execute(trx);
  await attachStatusRecipients(trx, rows);
}

/**
 * Applies events the caller has locked, one statement: their messages are moved (statusStatementHead)
 * and the events of known messages deleted, applied or not (applied events are not kept: sql/011).
 * Events of a message not known by its provider id are left as they are. Their recipients are
 * attached to their messages' contacts first (attachClaimedRecipients).
 */
async function applyClaimed(
  trx: Db,
  clock: Clock,
  events: readonly ClaimedEvent[],
): Promise<{ applied: number; messages: number }> {
  if (events.length === 0) return { applied: 0, messages: 0 };
  await attachClaimedRecipients(trx, events);
  const input: StatusEventInput[] = events.map((e) => ({
    providerMessageId: e.provider_message_id,
    status: e.status,
    at: e.provider_timestamp,
    errors: e.errors === null ? null : JSON.stringify(e.errors),
    clientReference: null,
    senderId: e.sender_id,
    order: Number(e.id),
    recipient: {
      phone: e.recipient_phone,
      userId: e.recipient_user_id,
      parentUserId: e.recipient_parent_user_id,
    },
  }));
  const { rows } = await sql<{ applied: number; messages: number }>`
    WITH ${statusStatementHead(input, clock.now())}, settled AS (
      DELETE FROM status_events s
      WHERE s.id = ANY(${events.map((e) => e.id)}::bigint[])
        AND EXISTS (SELECT 1 FROM known k WHERE k.provider_message_id = s.provider_message_id)
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM settled)::int AS applied,
           (SELECT count(*) FROM changed)::int AS messages`.execute(trx);
  return rows[0] ?? { applied: 0, messages: 0 };
}

/**
 * How long a status of a message we never knew by its provider id waits (a send whose id was never
 * recorded nor adopted, or a provider's status of someone else's message): after a week nothing will
 * claim it, and the backlog table must not keep it forever.
 */
export const STATUS_EVENT_EXPIRY: Expiry = {
  keptMs: 7 * DAY_MS,
  batch: 10_000,
  statement: (cutoff, batch) => sql`
    DELETE FROM status_events WHERE id IN (
      SELECT id FROM status_events WHERE received_at < ${cutoff} LIMIT ${batch} FOR UPDATE SKIP LOCKED
    )`,
};
