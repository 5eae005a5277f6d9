import type { RecipientAddress } from "../channel/identity.ts";
import {
  type ChannelProvider,
  failureOf,
  type OutboundPayload,
  outboundAddress,
  ProviderError,
  type SenderCredentials,
} from "../channel/provider.ts";
import type { Clock } from "../clock.ts";
import { recipientOf } from "../contacts/identity.ts";
import type { Db } from "../db/connect.ts";
import type { MessageFailure } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import type { StoredContent } from "../messages/presenter.ts";
import type { RedisClient } from "../redis/connect.ts";
import { senderCredentials } from "../senders/repository.ts";
import {
  applyOvertakingStatuses,
  byIds,
  byPairs,
  type Claimed,
  claim,
  heldAmong,
  pairOf,
  recordUntilStored,
  release,
  stillClaimed,
} from "./claim.ts";
import { EXPIRED } from "./expire.ts";
import { refusalAtClaim, SENDER_INACTIVE, settleFailure } from "./failure.ts";
import { knownProviderIds, SendNotYetPossible, unclaimedWaiting } from "./in-doubt.ts";
import { CALLS_IN_FLIGHT, inPool, takeTokens } from "./pacing.ts";
import type { Settled } from "./record.ts";
import { providerIdStash } from "./stash.ts";

// Imported from here by the sweeper and the tests.
export { adoptProviderId } from "./claim.ts";
export { SendNotYetPossible } from "./in-doubt.ts";
export { providerIdStash } from "./stash.ts";

/**
 * The send worker's work: hand accepted messages to the provider, exactly once, in order per
 * (sender, contact), at each sender's pace. A job names a batch of messages (the api's committed
 * batch, a sweep, a retry that is due); `deliverBatch`:
 *
 * 1. claims, in one statement, those still `accepted`, due (send_not_before) and not in doubt, that
 *    have no earlier unfinished message of their (sender, contact) pair: it records the attempt
 *    (send_started_at, send_attempts) as it claims (claim.ts);
 * 2. per sender, takes tokens from the sender's bucket in Redis (its messages per second, shared by
 *    every worker process, pacing.ts), and calls the provider for what was granted, concurrently;
 * 3. stashes the provider ids in Redis (one HSET, stash.ts) and records ids, failures and backoffs
 *    in Postgres in one multi-row statement (failure.ts decides which);
 * 4. claims the next message of every pair it just finished, and goes round again.
 *
 * A worker killed between the provider's answer and its record leaves the attempt in doubt: before
 * trying again we look for the id the provider gave it (in-doubt.ts).
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

/** What the provider is asked to send: to the contact's phone, or to its BSUID when it has none (recipientOf). */
export function outboundPayload(
  content: StoredContent,
  address: RecipientAddress,
  messageId: string,
): OutboundPayload {
  const to = outboundAddress(address);
  if (content.kind === "text") return { kind: "text", ...to, body: content.body, callbackData: messageId };
  return {
    kind: "template",
    ...to,
    name: content.template_name,
    language: content.language,
    components: content.components as Extract<OutboundPayload, { kind: "template" }>["components"],
    callbackData: messageId,
  };
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
  const { notDue, inDoubt } = await unclaimedWaiting(deps, ids, deps.clock.now());
  const pending = new Set([...notDue, ...inDoubt].map((w) => w.id));
  for (const { id, dueAt, lastError } of notDue) {
    report.outcomes.set(id, "retry");
    report.later.push({ messageId: id, dueAt, ...withLastError(lastError) });
  }
  if (inDoubt.length > 0) {
    const known = await knownProviderIds(
      deps,
      inDoubt.map((d) => d.id),
    );
    const adopted: Settled[] = [];
    for (const { id, senderId, contactId, dueAt, lastError } of inDoubt) {
      const providerMessageId = known.get(id);
      if (providerMessageId) {
        adopted.push({ id, senderId, contactId, outcome: "adopted", providerMessageId });
        continue;
      }
      report.outcomes.set(id, "retry");
      report.reasons.set(id, new SendNotYetPossible("the previous attempt's outcome is not known yet"));
      report.later.push({ messageId: id, dueAt, ...withLastError(lastError) });
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
  for (const id of await heldAmong(deps.db, skipped)) report.outcomes.set(id, "held");
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
          settled.push({ ...pairOf(row), outcome: "failed", refund: true, failure: SENDER_INACTIVE });
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
        const granted = await takeTokens(deps, sender, sendable.length);
        const { ours: chunk, lost } = await stillClaimed(deps, sendable.splice(0, granted));
        // Another worker has claimed it since: left to it.
        for (const row of lost) report.outcomes.set(row.id, "skipped");
        const done = await sendChunk(deps, credentials, chunk, report);
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
 * One chunk: the provider calls side by side, then the stash and the record of them all. A message's
 * valid_for is looked at just before its own call: it may have ended while the message waited for
 * its sender's tokens, or for a place behind the CALLS_IN_FLIGHT calls ahead of it (a slow provider
 * holds those for seconds). Then it fails `expired` without a call: never sent late.
 */
async function sendChunk(
  deps: SendDeps,
  credentials: SenderCredentials,
  chunk: Claimed[],
  report: BatchReport,
): Promise<Settled[]> {
  const settled = await inPool(chunk, CALLS_IN_FLIGHT, async (row): Promise<Settled> => {
    if (row.expires_at !== null && row.expires_at <= deps.clock.now()) {
      return { ...pairOf(row), outcome: "failed", refund: true, failure: EXPIRED };
    }
    try {
      const payload = outboundPayload(row.content, recipientOf(row), row.id);
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
