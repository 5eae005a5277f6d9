import { type RawBuilder, sql } from "kysely";
import type { Clock } from "../clock.ts";
import { WINDOW_MS } from "../contacts/messaging-state.ts";
import type { Db } from "../db/connect.ts";
import { unsent } from "../db/unsent.ts";
import { isDependencyDown } from "../http/dependency-faults.ts";
import type { Logger } from "../logger.ts";
import type { StoredContent } from "../messages/presenter.ts";
import type { RedisClient } from "../redis/connect.ts";
import { doubtCutoff } from "./in-doubt.ts";
import { type Recorded, recordOutcomes, type Settled } from "./record.ts";
import { providerIdStash } from "./stash.ts";
import { adoptProviderIds, applyStatusEvents } from "./status.ts";

/**
 * The send worker's repository: the statements that claim messages to send (recording the attempt
 * as they claim), give a claim back, keep it, and record what became of the sends (record.ts, the
 * one writer, retried while Postgres is away).
 */

/** What the claim statements take (SendDeps has it all). */
export interface ClaimDeps {
  config: { workers: { sendInDoubtMs: number } };
  db: Db;
  clock: Clock;
  logger: Logger;
}

/** What recording a provider id takes (the sweeper has it too). */
export interface AdoptDeps {
  config: { redisPrefix: string };
  db: Db;
  clock: Clock;
  redis: RedisClient;
  logger: Logger;
}

/** The Postgres record of a sent message's id is retried this often at most. */
const RECORD_RETRY_MAX_MS = 1000;

export interface Claimed {
  id: string;
  sender_id: string;
  contact_id: string;
  content: StoredContent;
  send_attempts: number;
  send_throttled: number;
  prev_started_at: Date | null;
  /** The contact's address (src/contacts/identity.ts recipientOf): its phone, else its BSUID. */
  phone: string | null;
  user_id: string | null;
  provider_phone_number_id: string;
  waba_id: string;
  access_token: string;
  sender_active: boolean;
  mps: number;
  /** Checked at the claim (DESIGN §13): the contact opted out, the message waited past valid_for, a
   * scheduled free text whose window has closed by its time. */
  opted_out: boolean;
  expired: boolean;
  window_closed: boolean;
  /** valid_for's end: checked again just before the provider call (the wait for tokens may pass it). */
  expires_at: Date | null;
  /** When this claim took it (set here, not by Postgres). */
  claimed_at: Date;
}

export const pairOf = (row: Claimed) => ({ id: row.id, senderId: row.sender_id, contactId: row.contact_id });

/**
 * Claims what of `selector` may be sent now, recording the attempt. Excluded: anything not
 * `accepted` or already with a provider id; a retry not due yet; an attempt in doubt (started
 * within sendInDoubtMs); a message with an earlier unfinished one of its (sender, contact) pair;
 * a row another worker is claiming this instant (SKIP LOCKED).
 */
export async function claim(deps: ClaimDeps, selector: RawBuilder<unknown>, now: Date): Promise<Claimed[]> {
  const { rows } = await sql<Claimed>`
    WITH candidate AS (
      SELECT m.seq, m.send_started_at AS prev_started_at
      FROM messages m
      WHERE ${selector}
        AND ${unsent("m")} AND m.status = 'accepted'
        AND (m.send_not_before IS NULL OR m.send_not_before <= ${now})
        AND (m.send_started_at IS NULL OR m.send_started_at <= ${doubtCutoff(deps, now)})
        -- A scalar subquery, not NOT EXISTS: it stays one probe of the pair index per message. As
        -- an anti-join the planner may walk the whole unsent index for each message instead
        -- (cheap by its statistics, not with the index's dead entries of messages just sent).
        AND (SELECT 1 FROM messages e
             WHERE e.sender_id = m.sender_id AND e.contact_id = m.contact_id
               AND ${unsent("e")} AND e.seq < m.seq
             LIMIT 1) IS NULL
      ORDER BY m.seq
      FOR UPDATE OF m SKIP LOCKED
    )
    UPDATE messages m
    SET send_started_at = ${now}, send_attempts = m.send_attempts + 1, send_not_before = NULL
    FROM candidate c, contacts ct, senders s
    WHERE m.seq = c.seq AND ct.id = m.contact_id AND s.id = m.sender_id
    RETURNING m.id, m.sender_id, m.contact_id, m.content, m.send_attempts, m.send_throttled,
      c.prev_started_at, ct.phone, ct.user_id, s.provider_phone_number_id, s.waba_id, s.access_token,
      s.active AS sender_active, s.mps,
      ct.opted_out_at IS NOT NULL AS opted_out,
      m.expires_at, COALESCE(m.expires_at <= ${now}, false) AS expired,
      m.send_at IS NOT NULL AND m.type = 'text'
        AND COALESCE(ct.last_inbound_at + ${`${WINDOW_MS} milliseconds`}::interval <= ${now}, true)
        AS window_closed`.execute(deps.db);
  return rows.map((row) => ({ ...row, claimed_at: now }));
}

export const byIds = (ids: readonly string[]) => sql`m.id = ANY(${[...ids]}::text[])`;

export const byPairs = (pairs: readonly { sender_id: string; contact_id: string }[]) =>
  sql`(m.sender_id, m.contact_id) IN (SELECT * FROM unnest(${pairs.map((p) => p.sender_id)}::text[], ${pairs.map((p) => p.contact_id)}::text[]))`;

/** Claimed rows to put back as they were: they never reached the provider (a fault before the call). */
export async function release(deps: ClaimDeps, rows: readonly Claimed[]): Promise<void> {
  if (rows.length === 0) return;
  await sql`
    UPDATE messages m
    SET send_started_at = v.prev_started_at, send_attempts = m.send_attempts - 1
    FROM unnest(
      ${rows.map((r) => r.id)}::text[],
      ${rows.map((r) => r.claimed_at.toISOString())}::timestamptz[],
      ${rows.map((r) => r.prev_started_at?.toISOString() ?? null)}::timestamptz[]
    ) AS v(id, claimed_at, prev_started_at)
    WHERE m.id = v.id AND m.send_started_at = v.claimed_at AND m.provider_message_id IS NULL`
    .execute(deps.db)
    .then(
      () => {},
      (error: Error) =>
        deps.logger.warn(
          { messages: rows.length, err: error.message },
          "claim not released; in doubt until it lapses",
        ),
    );
}

/**
 * The claim's stamp (send_started_at) is also the in-doubt clock: a row that waited for its
 * sender's tokens longer than `sendInDoubtMs` looks, to another worker or the sweeper, like an
 * attempt that never reached the provider, and is claimed and sent again. So a row claimed more
 * than a quarter of that window ago is stamped again just before its provider call, on condition
 * that the stamp is still ours; a row another worker has claimed since is left to it (`lost`).
 */
export async function stillClaimed(
  deps: ClaimDeps,
  rows: Claimed[],
): Promise<{ ours: Claimed[]; lost: Claimed[] }> {
  const now = deps.clock.now();
  const staleBefore = now.getTime() - deps.config.workers.sendInDoubtMs / 4;
  const stale = rows.filter((r) => r.claimed_at.getTime() < staleBefore);
  if (stale.length === 0) return { ours: rows, lost: [] };
  const { rows: kept } = await sql<{ id: string }>`
    UPDATE messages m SET send_started_at = ${now}
    FROM unnest(
      ${stale.map((r) => r.id)}::text[],
      ${stale.map((r) => r.claimed_at.toISOString())}::timestamptz[]
    ) AS v(id, claimed_at)
    WHERE m.id = v.id AND m.send_started_at = v.claimed_at AND m.provider_message_id IS NULL
    RETURNING m.id`.execute(deps.db);
  const restamped = new Set(kept.map((r) => r.id));
  const ours: Claimed[] = [];
  const lost: Claimed[] = [];
  for (const row of rows) {
    if (!stale.includes(row)) ours.push(row);
    else if (!restamped.has(row.id)) lost.push(row);
    else {
      row.claimed_at = now;
      ours.push(row);
    }
  }
  return { ours, lost };
}

/** Of messages the claim left, those held behind an earlier message of their pair (never attempted). */
export async function heldAmong(db: Db, ids: string[]): Promise<string[]> {
  const held = await db
    .selectFrom("messages")
    .select("id")
    .where("id", "in", ids)
    .where("status", "=", "accepted")
    .where("provider_message_id", "is", null)
    .where("send_started_at", "is", null)
    .execute();
  return held.map((row) => row.id!);
}

/**
 * Postgres must learn the provider ids of messages the provider accepted: retried while we live.
 * Statuses that overtook a send keep waiting until they are applied (applyOvertakingStatuses): the
 * webhook store stores a newer status behind them (statusStatementHead's `behindWaiting`).
 */
export async function recordUntilStored(deps: ClaimDeps, settled: readonly Settled[]): Promise<Recorded> {
  for (let attempt = 0; ; attempt++) {
    try {
      const recorded = await recordOutcomes(deps.db, deps.clock, settled);
      if (attempt > 0)
        deps.logger.info(
          { messages: settled.length, attempts: attempt + 1 },
          "sends recorded after an outage",
        );
      return recorded;
    } catch (error) {
      if (!isDependencyDown(error)) throw error;
      if (attempt === 0) {
        deps.logger.warn(
          { messages: settled.length, err: (error as Error).message },
          "sent, but Postgres cannot record the outcome yet; retrying",
        );
      }
      await Bun.sleep(Math.min(50 * 2 ** attempt, RECORD_RETRY_MAX_MS));
    }
  }
}

/**
 * Status webhooks that arrived before the send's answer wait in status_events for the id: applied
 * in one transaction for the chunk's overtaken messages, not one each.
 */
export async function applyOvertakingStatuses(
  deps: Pick<AdoptDeps, "db" | "clock" | "logger">,
  providerMessageIds: string[],
): Promise<void> {
  try {
    await applyStatusEvents(deps.db, deps.clock, providerMessageIds);
  } catch (error) {
    if (!isDependencyDown(error)) throw error;
    // The sweeper applies them later (the messages have their ids now).
    deps.logger.warn({ err: (error as Error).message }, "statuses left to the sweeper");
  }
}

/** A stashed provider id becomes the message's (the sweeper); a no-op once recorded. */
export async function adoptProviderId(
  deps: AdoptDeps,
  messageId: string,
  providerMessageId: string,
): Promise<boolean> {
  const adopted = (await adoptProviderIds(deps.db, deps.clock, [{ messageId, providerMessageId }])) > 0;
  await applyOvertakingStatuses(deps, [providerMessageId]);
  await providerIdStash(deps).drop(messageId);
  return adopted;
}
