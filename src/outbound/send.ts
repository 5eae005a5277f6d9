import { sql } from "kysely";
import {
  type ChannelProvider,
  failureOf,
  type OutboundPayload,
  ProviderError,
  type SenderCredentials,
} from "../channel/provider.ts";
import type { Clock } from "../clock.ts";
import { WINDOW_MS } from "../contacts/messaging-state.ts";
import type { Db } from "../db/connect.ts";
import type { MessageFailure } from "../db/schema.ts";
import { unsent } from "../db/unsent.ts";
import { isDependencyDown } from "../http/dependency-faults.ts";
import { withTimeout } from "../lib/with-timeout.ts";
import type { Logger } from "../logger.ts";
import type { StoredContent } from "../messages/presenter.ts";
import { SEND_ATTEMPTS } from "../queues/index.ts";
import { type RedisClient, redisKeys } from "../redis/connect.ts";
import { senderCredentials } from "../senders/repository.ts";
import { EXPIRED } from "./expire.ts";
import { type Recorded, recordOutcomes, type Settled } from "./record.ts";
import { adoptProviderIds, applyStatusEvents } from "./status.ts";

/**
 * The send worker's work: hand accepted messages to the provider, exactly once, in order per
 * (sender, contact), at each sender's pace. A job names a batch of messages (the api's committed
 * batch, a sweep, a retry that is due); `deliverBatch`:
 *
 * 1. claims, in one statement, those still `accepted`, due (send_not_before) and not in doubt, that
 *    have no earlier unfinished message of their (sender, contact) pair: it records the attempt
 *    (send_started_at, send_attempts) as it claims;
 * 2. per sender, takes tokens from the sender's bucket in Redis (its messages per second, shared by
 *    every worker process), and calls the provider for what was granted, concurrently;
 * 3. stashes the provider ids in Redis (one HSET) and records ids, failures and backoffs in
 *    Postgres in one multi-row statement;
 * 4. claims the next message of every pair it just finished, and goes round again.
 *
 * Before calling the provider the attempt is recorded (send_started_at); after the provider's
 * answer, its message id. A worker killed in between leaves the attempt "in doubt": the provider
 * may have sent it. The send carries our message id as Graph's biz_opaque_callback_data, which
 * every status webhook of that send echoes; so before trying again we look in the provider-id
 * stash and for such a status, and only after `sendInDoubtMs` without either do we conclude that
 * the first attempt never arrived.
 */

/** What became of one message of a job. */
export type DeliveryOutcome =
  /** handed to the provider, which took it */
  | "sent"
  /** failed for good (`failure`) */
  | "failed"
  /** an in-doubt send confirmed by the provider-id stash or a status webhook */
  | "adopted"
  /** to be tried again later (a retryable failure, throttling, an in-doubt send) */
  | "retry"
  /** an earlier message of its pair is unfinished: sent once that one is done */
  | "held"
  /** nothing to do (sent already, failed, or another worker has it in hand) */
  | "skipped";

export interface SendDeps {
  config: {
    workers: { sendInDoubtMs: number; sendRetryBaseMs: number };
    providerTokenKey: Buffer;
    redisPrefix: string;
  };
  db: Db;
  /** Holds the provider-id stash (see providerIdStash) and the senders' token buckets. */
  redis: RedisClient;
  provider: ChannelProvider;
  clock: Clock;
  logger: Logger;
}

/** A message to try again once it is due (a delayed job, `{ messageIds: [id] }`). */
export interface SendLater {
  messageId: string;
  /** Epoch milliseconds. */
  dueAt: number;
  /** Why its last attempt is to be retried (the job's data shows it on the queue dashboard). */
  lastError?: Pick<MessageFailure, "code" | "message">;
}

export interface BatchReport {
  outcomes: Map<string, DeliveryOutcome>;
  later: SendLater[];
  /** Why a message is to be retried (the provider's error, or SendNotYetPossible). */
  reasons: Map<string, Error>;
}

/** An in-doubt send whose outcome is not known yet. */
export class SendNotYetPossible extends Error {}

/** Provider calls in flight at once for one chunk of a batch. */
const CALLS_IN_FLIGHT = 100;
/** A chunk never asks for more tokens than this, whatever the sender's pace. */
const MAX_CHUNK = 500;
/** An in-doubt send looks again for its stashed or echoed id this often. */
const IN_DOUBT_POLL_MS = 1000;
/** Throttled sends back off exponentially up to this. */
const THROTTLE_BACKOFF_CAP_MS = 60_000;

interface Claimed {
  id: string;
  sender_id: string;
  contact_id: string;
  content: StoredContent;
  send_attempts: number;
  send_throttled: number;
  prev_started_at: Date | null;
  phone: string;
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

export function outboundPayload(content: StoredContent, to: string, messageId: string): OutboundPayload {
  if (content.kind === "text") return { kind: "text", to, body: content.body, callbackData: messageId };
  return {
    kind: "template",
    to,
    name: content.template_name,
    language: content.language,
    components: content.components as Extract<OutboundPayload, { kind: "template" }>["components"],
    callbackData: messageId,
  };
}

/**
 * Claims what of `selector` may be sent now, recording the attempt. Excluded: anything not
 * `accepted` or already with a provider id; a retry not due yet; an attempt in doubt (started
 * within sendInDoubtMs); a message with an earlier unfinished one of its (sender, contact) pair;
 * a row another worker is claiming this instant (SKIP LOCKED).
 */
async function claim(deps: SendDeps, selector: ReturnType<typeof sql>, now: Date): Promise<Claimed[]> {
  const doubtCutoff = new Date(now.getTime() - deps.config.workers.sendInDoubtMs);
  const { rows } = await sql<Claimed>`
    WITH candidate AS (
      SELECT m.seq, m.send_started_at AS prev_started_at
      FROM messages m
      WHERE ${selector}
        AND ${unsent("m")} AND m.status = 'accepted'
        AND (m.send_not_before IS NULL OR m.send_not_before <= ${now})
        AND (m.send_started_at IS NULL OR m.send_started_at <= ${doubtCutoff})
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
      c.prev_started_at, ct.phone, s.provider_phone_number_id, s.waba_id, s.access_token,
      s.active AS sender_active, s.mps,
      ct.opted_out_at IS NOT NULL AS opted_out,
      m.expires_at, COALESCE(m.expires_at <= ${now}, false) AS expired,
      m.send_at IS NOT NULL AND m.type = 'text'
        AND COALESCE(ct.last_inbound_at + ${`${WINDOW_MS} milliseconds`}::interval <= ${now}, true)
        AS window_closed`.execute(deps.db);
  return rows.map((row) => ({ ...row, claimed_at: now }));
}

const byIds = (ids: readonly string[]) => sql`m.id = ANY(${[...ids]}::text[])`;

const byPairs = (pairs: readonly { sender_id: string; contact_id: string }[]) =>
  sql`(m.sender_id, m.contact_id) IN (SELECT * FROM unnest(${pairs.map((p) => p.sender_id)}::text[], ${pairs.map((p) => p.contact_id)}::text[]))`;

/**
 * Why a claimed message must not go out (DESIGN §13), in the order the contract ranks them: it is
 * failed at the claim instead, nothing sent.
 */
function refusalAtClaim(row: Claimed): MessageFailure | undefined {
  if (row.opted_out) {
    return {
      code: "recipient_opted_out",
      message: "The customer opted out before the message could be sent.",
      retryable: false,
    };
  }
  if (row.window_closed) {
    return {
      code: "messaging_window_closed",
      message: "The 24-hour window had closed by the scheduled time; free text cannot be sent outside it.",
      retryable: false,
    };
  }
  if (row.expired) return EXPIRED;
  return undefined;
}

/** Claimed rows to put back as they were: they never reached the provider (a fault before the call). */
async function release(deps: SendDeps, rows: readonly Claimed[]): Promise<void> {
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

const pairOf = (row: Claimed) => ({ id: row.id, senderId: row.sender_id, contactId: row.contact_id });

/** Postgres must learn the provider ids of messages the provider accepted: retried while we live. */
async function recordUntilStored(deps: SendDeps, settled: readonly Settled[]): Promise<Recorded> {
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

/** Provider ids proven by a status webhook of the message's own sender that echoed its id. */
async function echoedProviderIds(db: Db, messageIds: string[]): Promise<Map<string, string>> {
  if (messageIds.length === 0) return new Map();
  const { rows } = await sql<{ id: string; provider_message_id: string }>`
    SELECT DISTINCT ON (se.client_reference) se.client_reference AS id, se.provider_message_id
    FROM status_events se JOIN messages m ON m.id = se.client_reference
    WHERE se.client_reference = ANY(${messageIds}::text[])
      AND (se.sender_id IS NULL OR se.sender_id = m.sender_id)
    ORDER BY se.client_reference, se.id`.execute(db);
  return new Map(rows.map((r) => [r.id, r.provider_message_id]));
}

/** For in-doubt sends: the id the provider gave the earlier attempt, if the stash or a webhook knows it. */
async function knownProviderIds(deps: SendDeps, messageIds: string[]): Promise<Map<string, string>> {
  if (messageIds.length === 0) return new Map();
  const known = await providerIdStash(deps).getMany(messageIds);
  const rest = messageIds.filter((id) => !known.has(id));
  for (const [id, providerId] of await echoedProviderIds(deps.db, rest)) known.set(id, providerId);
  return known;
}

function backoffMs(base: number, failures: number, cap = Number.POSITIVE_INFINITY): number {
  return Math.min(base * 2 ** Math.max(0, failures - 1), cap);
}

/** What the provider's answer (or its absence) means for one claimed message. */
function settleFailure(deps: SendDeps, row: Claimed, error: unknown, now: number): Settled {
  const base = deps.config.workers.sendRetryBaseMs;
  if (!(error instanceof ProviderError)) {
    // Not the provider's answer (a bug in between): treat as unanswered, so the in-doubt rule decides.
    deps.logger.error({ message_id: row.id, err: (error as Error)?.message }, "send failed unexpectedly");
  }
  const providerError = error instanceof ProviderError ? error : undefined;
  // An answer from the provider settles the attempt; a timeout or broken connection does not.
  const answered = providerError?.httpStatus !== undefined;
  const reason = error instanceof Error ? error : new Error(String(error));
  // One conversion for the retry's last_error and the failure for good.
  const failure = failureOf(error);
  if (providerError && answered && providerError.code === "provider_rate_limited") {
    // Throttling (the sender's throughput, the pair's rate, ...): wait, never fail for it. Only
    // this message waits; the later ones of its pair wait behind it, other pairs go on.
    const throttles = row.send_throttled + 1;
    return {
      ...pairOf(row),
      outcome: "retry",
      throttled: true,
      notBefore: now + backoffMs(base, throttles, THROTTLE_BACKOFF_CAP_MS),
      lastError: failure,
      reason,
    };
  }
  const failures = row.send_attempts - row.send_throttled;
  const retryable = providerError ? providerError.retryable || !answered : true;
  if (retryable && failures < SEND_ATTEMPTS) {
    return {
      ...pairOf(row),
      outcome: "retry",
      notBefore: now + backoffMs(base, failures),
      keepStarted: !answered,
      lastError: failure,
      reason,
    };
  }
  deps.logger.warn(
    { message_id: row.id, code: providerError?.code, attempts: row.send_attempts },
    "send failed for good",
  );
  return {
    ...pairOf(row),
    outcome: "failed",
    failure,
    reason,
  };
}

/** Runs `task` over `items` with at most `limit` in flight. */
async function inPool<T, R>(items: readonly T[], limit: number, task: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await task(items[i]!);
    }
  });
  await Promise.all(lanes);
  return results;
}

/** A retry's last error as its delayed job shows it (src/queues/index.ts): code and message. */
function withLastError(error: MessageFailure | null | undefined): Pick<SendLater, "lastError"> {
  return error ? { lastError: { code: error.code, message: error.message } } : {};
}

function newReport(): BatchReport {
  return { outcomes: new Map(), later: [], reasons: new Map() };
}

/**
 * One job: the messages `messageIds` names, and after them the next messages of the pairs they
 * finish. Retries are reported in `later` for the caller to enqueue (delayed jobs).
 */
export async function deliverBatch(deps: SendDeps, messageIds: readonly string[]): Promise<BatchReport> {
  const report = newReport();
  const ids = [...new Set(messageIds)];
  if (ids.length === 0) return report;
  const claimed = await claim(deps, byIds(ids), deps.clock.now());
  const claimedIds = new Set(claimed.map((r) => r.id));
  const unclaimed = ids.filter((id) => !claimedIds.has(id));
  await Promise.all([
    unclaimed.length > 0 ? explainUnclaimed(deps, unclaimed, report) : undefined,
    deliverClaimed(deps, claimed, report),
  ]);
  return report;
}

/**
 * Messages the claim left: a retry not due yet and an attempt in doubt come back later (the
 * latter adopted at once if its id is known); a held one is sent when its predecessor is done.
 */
async function explainUnclaimed(deps: SendDeps, ids: string[], report: BatchReport): Promise<void> {
  const now = deps.clock.now();
  const doubtCutoff = new Date(now.getTime() - deps.config.workers.sendInDoubtMs);
  const waiting = await deps.db
    .selectFrom("messages")
    .select(["id", "sender_id", "contact_id", "send_started_at", "send_not_before", "last_error"])
    .where("id", "in", ids)
    .where("status", "=", "accepted")
    .where("direction", "=", "outbound")
    .where("provider_message_id", "is", null)
    .where((eb) => eb.or([eb("send_not_before", ">", now), eb("send_started_at", ">", doubtCutoff)]))
    .execute();
  const pending = new Set<string>();
  const inDoubt: {
    id: string;
    senderId: string;
    contactId: string;
    startedAt: Date;
    lastError: MessageFailure | null;
  }[] = [];
  for (const row of waiting) {
    const id = row.id!;
    pending.add(id);
    if (row.send_started_at && row.send_started_at > doubtCutoff) {
      inDoubt.push({
        id,
        senderId: row.sender_id!,
        contactId: row.contact_id,
        startedAt: row.send_started_at,
        lastError: row.last_error,
      });
    } else if (row.send_not_before) {
      report.outcomes.set(id, "retry");
      report.later.push({
        messageId: id,
        dueAt: row.send_not_before.getTime(),
        ...withLastError(row.last_error),
      });
    }
  }
  if (inDoubt.length > 0) {
    const known = await knownProviderIds(
      deps,
      inDoubt.map((d) => d.id),
    );
    const adopted: Settled[] = [];
    for (const { id, senderId, contactId, startedAt, lastError } of inDoubt) {
      const providerMessageId = known.get(id);
      if (providerMessageId) {
        adopted.push({ id, senderId, contactId, outcome: "adopted", providerMessageId });
        continue;
      }
      report.outcomes.set(id, "retry");
      report.reasons.set(id, new SendNotYetPossible("the previous attempt's outcome is not known yet"));
      const lapses = startedAt.getTime() + deps.config.workers.sendInDoubtMs;
      report.later.push({
        messageId: id,
        dueAt: Math.min(lapses, now.getTime() + IN_DOUBT_POLL_MS),
        ...withLastError(lastError),
      });
    }
    if (adopted.length > 0) {
      await settle(deps, adopted, report);
      deps.logger.info({ messages: adopted.length }, "in-doubt sends confirmed by the stash or a webhook");
      const successors = await claimSuccessors(deps, adopted, report);
      if (successors.length > 0) await deliverClaimed(deps, successors, report);
    }
  }
  for (const id of ids) {
    if (report.outcomes.has(id)) continue;
    // Not sendable now for no reason above: held behind its pair, finished, or claimed elsewhere.
    report.outcomes.set(id, pending.has(id) ? "retry" : "skipped");
  }
  await markHeld(deps, ids, report);
}

/** Tells "held behind an earlier message of its pair" from "nothing to do" (metrics, the wrapper). */
async function markHeld(deps: SendDeps, ids: string[], report: BatchReport): Promise<void> {
  const skipped = ids.filter((id) => report.outcomes.get(id) === "skipped");
  if (skipped.length === 0) return;
  const held = await deps.db
    .selectFrom("messages")
    .select("id")
    .where("id", "in", skipped)
    .where("status", "=", "accepted")
    .where("provider_message_id", "is", null)
    .where("send_started_at", "is", null)
    .execute();
  for (const row of held) report.outcomes.set(row.id!, "held");
}

/** Claimed messages, grouped by sender (each at its own pace), the senders side by side. */
async function deliverClaimed(deps: SendDeps, rows: Claimed[], report: BatchReport): Promise<void> {
  const bySender = new Map<string, Claimed[]>();
  for (const row of rows) {
    const group = bySender.get(row.sender_id);
    if (group) group.push(row);
    else bySender.set(row.sender_id, [row]);
  }
  await Promise.all([...bySender.values()].map((group) => deliverForSender(deps, group, report)));
}

/** One sender's claimed messages: chunk by chunk as its token bucket allows, then their successors. */
async function deliverForSender(deps: SendDeps, claimed: Claimed[], report: BatchReport): Promise<void> {
  // Claimed and not yet handed to the provider: released if we fail before.
  const queue = [...claimed];
  const sendable: Claimed[] = [];
  const keys = redisKeys(deps.config.redisPrefix);
  let credentials: SenderCredentials | Error | undefined;
  try {
    while (queue.length > 0) {
      const settled: Settled[] = [];
      // What needs no provider call: an in-doubt send whose id is known; a deactivated sender; a
      // token that does not decrypt.
      const inDoubt = queue.filter((r) => r.prev_started_at !== null).map((r) => r.id);
      const known = await knownProviderIds(deps, inDoubt);
      for (const row of queue.splice(0)) {
        const providerMessageId = known.get(row.id);
        if (providerMessageId) {
          settled.push({ ...pairOf(row), outcome: "adopted", providerMessageId, refund: true });
          continue;
        }
        const refusal = refusalAtClaim(row);
        if (refusal) {
          settled.push({ ...pairOf(row), outcome: "failed", refund: true, failure: refusal });
          continue;
        }
        if (!row.sender_active && !row.prev_started_at) {
          // Deactivated after the message was accepted (the api's sender cache lives a few seconds).
          settled.push({
            ...pairOf(row),
            outcome: "failed",
            refund: true,
            failure: {
              code: "sender_inactive",
              message: "The sender was deactivated before the message could be sent.",
              retryable: false,
            },
          });
          continue;
        }
        credentials ??= credentialsOf(deps, row);
        if (credentials instanceof ProviderError) {
          // The stored token does not decrypt: no retry can mend that, so fail now, nothing sent.
          deps.logger.error({ message_id: row.id, code: credentials.code }, credentials.message);
          settled.push({
            ...pairOf(row),
            outcome: "failed",
            refund: true,
            failure: failureOf(credentials),
          });
          continue;
        }
        sendable.push(row);
      }
      if (settled.length > 0) {
        await settle(deps, settled, report);
        queue.push(...(await claimSuccessors(deps, settled, report)));
      }
      if (sendable.length === 0) continue;
      if (credentials instanceof Error || credentials === undefined) continue;

      // Pace: as many as the sender's bucket grants now; the rest wait for their tokens.
      const sender = sendable[0]!;
      while (sendable.length > 0) {
        const wanted = Math.min(sendable.length, sender.mps, MAX_CHUNK);
        const [granted, waitMs] = await deps.redis.takeSendTokens(
          keys.sendTokens(sender.sender_id),
          sender.mps,
          wanted,
          Math.max(1, Math.ceil(sender.mps / 10)),
        );
        if (granted <= 0) {
          await Bun.sleep(waitMs);
          continue;
        }
        const chunk = await stillClaimed(deps, sendable.splice(0, granted), report);
        // Its valid_for may have ended while it waited for its tokens: never sent late.
        const now = deps.clock.now();
        const late = chunk.filter((row) => row.expires_at !== null && row.expires_at <= now);
        const done = [
          ...(late.length > 0 ? await failBeforeSending(deps, late, EXPIRED, report) : []),
          ...(await sendChunk(
            deps,
            credentials,
            late.length > 0 ? chunk.filter((row) => !late.includes(row)) : chunk,
            report,
          )),
        ];
        // A successor (same sender) joins the next round: its own in-doubt check and tokens.
        queue.push(...(await claimSuccessors(deps, done, report)));
      }
    }
  } catch (error) {
    // Put back what never reached the provider, so that it is not in doubt for nothing.
    await release(deps, [...queue, ...sendable]);
    throw error;
  }
}

function credentialsOf(deps: SendDeps, row: Claimed): SenderCredentials | ProviderError {
  try {
    return senderCredentials(deps.config.providerTokenKey, { ...row, id: row.sender_id });
  } catch (error) {
    if (error instanceof ProviderError) return error;
    throw error;
  }
}

/**
 * The claim's stamp (send_started_at) is also the in-doubt clock: a row that waited for its
 * sender's tokens longer than `sendInDoubtMs` looks, to another worker or the sweeper, like an
 * attempt that never reached the provider, and is claimed and sent again. So a row claimed more
 * than a quarter of that window ago is stamped again just before its provider call, on condition
 * that the stamp is still ours; a row another worker has claimed since is left to it (skipped).
 */
async function stillClaimed(deps: SendDeps, rows: Claimed[], report: BatchReport): Promise<Claimed[]> {
  const now = deps.clock.now();
  const staleBefore = now.getTime() - deps.config.workers.sendInDoubtMs / 4;
  const stale = rows.filter((r) => r.claimed_at.getTime() < staleBefore);
  if (stale.length === 0) return rows;
  const { rows: kept } = await sql<{ id: string }>`
    UPDATE messages m SET send_started_at = ${now}
    FROM unnest(
      ${stale.map((r) => r.id)}::text[],
      ${stale.map((r) => r.claimed_at.toISOString())}::timestamptz[]
    ) AS v(id, claimed_at)
    WHERE m.id = v.id AND m.send_started_at = v.claimed_at AND m.provider_message_id IS NULL
    RETURNING m.id`.execute(deps.db);
  const ours = new Set(kept.map((r) => r.id));
  return rows.filter((row) => {
    if (!stale.includes(row)) return true;
    if (!ours.has(row.id)) {
      report.outcomes.set(row.id, "skipped");
      return false;
    }
    row.claimed_at = now;
    return true;
  });
}

/** Claimed messages failed without a provider call (the attempt given back). */
async function failBeforeSending(
  deps: SendDeps,
  rows: Claimed[],
  failure: MessageFailure,
  report: BatchReport,
): Promise<Settled[]> {
  const settled: Settled[] = rows.map((row) => ({
    ...pairOf(row),
    outcome: "failed",
    refund: true,
    failure,
  }));
  await settle(deps, settled, report);
  return settled;
}

/** One chunk: the provider calls side by side, then the stash and the record of them all. */
async function sendChunk(
  deps: SendDeps,
  credentials: SenderCredentials,
  chunk: Claimed[],
  report: BatchReport,
): Promise<Settled[]> {
  const settled = await inPool(chunk, CALLS_IN_FLIGHT, async (row): Promise<Settled> => {
    try {
      const payload = outboundPayload(row.content, row.phone, row.id);
      const { providerMessageId } = await deps.provider.sendMessage(credentials, payload);
      return { ...pairOf(row), outcome: "sent", providerMessageId };
    } catch (error) {
      return settleFailure(deps, row, error, deps.clock.now().getTime());
    }
  });
  // Sent: from here on the ids must not be forgotten, whatever Postgres does (issue 12).
  const sent = settled.filter((s) => s.outcome === "sent");
  if (sent.length > 0) {
    await providerIdStash(deps).putMany(
      sent.map((s) => [s.id, s.providerMessageId!]),
      deps.logger,
    );
  }
  await settle(deps, settled, report);
  return settled;
}

/**
 * Records settled messages (one statement, retried while Postgres is away), then applies statuses
 * that overtook a send and clears the stash of what is recorded.
 */
async function settle(deps: SendDeps, settled: Settled[], report: BatchReport): Promise<void> {
  const { statusesWaiting } = await recordUntilStored(deps, settled);
  const withIds = settled.filter((s) => s.providerMessageId);
  for (const s of settled) {
    report.outcomes.set(s.id, s.outcome);
    if (s.outcome === "retry") {
      report.later.push({
        messageId: s.id,
        dueAt: s.notBefore!,
        ...withLastError(s.lastError),
      });
      if (s.reason) report.reasons.set(s.id, s.reason);
    }
  }
  if (withIds.length === 0) return;
  await applyOvertakingStatuses(deps, statusesWaiting);
  await providerIdStash(deps).dropMany(withIds.map((s) => s.id));
}

/**
 * Status webhooks that arrived before the send's answer wait in status_events for the id: applied
 * in one transaction for the chunk's overtaken messages, not one each.
 */
async function applyOvertakingStatuses(deps: AdoptDeps, providerMessageIds: string[]): Promise<void> {
  try {
    await applyStatusEvents(deps.db, deps.clock, providerMessageIds);
  } catch (error) {
    if (!isDependencyDown(error)) throw error;
    // The sweeper applies them later (the messages have their ids now).
    deps.logger.warn({ err: (error as Error).message }, "statuses left to the sweeper");
  }
}

/** The next message of every pair whose message just finished (sent, adopted or failed for good). */
async function claimSuccessors(
  deps: SendDeps,
  settled: readonly Settled[],
  report: BatchReport,
): Promise<Claimed[]> {
  const pairs = new Map<string, { sender_id: string; contact_id: string }>();
  for (const s of settled) {
    if (s.outcome === "retry") continue;
    pairs.set(`${s.senderId}\u0000${s.contactId}`, { sender_id: s.senderId, contact_id: s.contactId });
  }
  if (pairs.size === 0) return [];
  const rows = await claim(deps, byPairs([...pairs.values()]), deps.clock.now());
  // A successor named by this job too is not "held" any more.
  for (const row of rows) report.outcomes.delete(row.id);
  return rows;
}

/** Bounds a stash command: the workers' Redis connection queues commands while Redis is away. */
const STASH_TIMEOUT_MS = 2000;
/** The Postgres record of a sent message's id is retried this often at most. */
const RECORD_RETRY_MAX_MS = 1000;

/** Matched by isDependencyDown like ioredis' own command timeout. */
const STASH_TIMEOUT_MESSAGE = "Command timed out (provider-id stash)";

/**
 * The provider-id stash: a Redis hash, message id -> the provider's id, written the moment the
 * provider accepts a send and cleared once Postgres has recorded it. Postgres away at that moment,
 * the id outlives the worker: the retry (deliverBatch) and the sweeper adopt it before anything is
 * sent again. Redis restarting empty at the same time leaves only the in-doubt rule.
 */
export function providerIdStash(deps: { redis: RedisClient; config: { redisPrefix: string } }) {
  const key = redisKeys(deps.config.redisPrefix).providerIdStash();
  return {
    /**
     * One HSET for a whole chunk. Best effort: with Redis away too, the Postgres record (retried
     * while we live) still follows.
     */
    async putMany(pairs: [messageId: string, providerMessageId: string][], logger: Logger): Promise<void> {
      if (pairs.length === 0) return;
      await withTimeout(
        deps.redis.hset(key, Object.fromEntries(pairs)),
        STASH_TIMEOUT_MS,
        STASH_TIMEOUT_MESSAGE,
      ).catch((error: Error) =>
        logger.warn({ messages: pairs.length, err: error.message }, "provider-id stash not written"),
      );
    },
    async get(messageId: string): Promise<string | undefined> {
      return (
        (await withTimeout(deps.redis.hget(key, messageId), STASH_TIMEOUT_MS, STASH_TIMEOUT_MESSAGE)) ??
        undefined
      );
    },
    async getMany(messageIds: string[]): Promise<Map<string, string>> {
      const values = await withTimeout(
        deps.redis.hmget(key, ...messageIds),
        STASH_TIMEOUT_MS,
        STASH_TIMEOUT_MESSAGE,
      );
      const found = new Map<string, string>();
      messageIds.forEach((id, i) => {
        const value = values[i];
        if (value) found.set(id, value);
      });
      return found;
    },
    async drop(messageId: string): Promise<void> {
      await this.dropMany([messageId]);
    },
    async dropMany(messageIds: string[]): Promise<void> {
      if (messageIds.length === 0) return;
      await withTimeout(deps.redis.hdel(key, ...messageIds), STASH_TIMEOUT_MS, STASH_TIMEOUT_MESSAGE).catch(
        () => {},
      );
    },
    /** Every stashed pair, a page at a time (the sweeper). */
    async *entries(): AsyncGenerator<[messageId: string, providerMessageId: string]> {
      let cursor = "0";
      do {
        const [next, flat] = await deps.redis.hscan(key, cursor, "COUNT", 500);
        cursor = next;
        for (let i = 0; i + 1 < flat.length; i += 2) yield [flat[i]!, flat[i + 1]!];
      } while (cursor !== "0");
    },
  };
}

/** What recording a provider id takes (the sweeper has it too). */
type AdoptDeps = Pick<SendDeps, "db" | "clock" | "redis" | "logger"> & { config: { redisPrefix: string } };

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
