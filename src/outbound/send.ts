import { sql } from "kysely";
import {
  type ChannelProvider,
  type OutboundPayload,
  ProviderError,
  type SenderCredentials,
} from "../channel/provider.ts";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import type { MessageFailure } from "../db/schema.ts";
import { isDependencyDown } from "../http/dependency-faults.ts";
import type { Logger } from "../logger.ts";
import type { StoredContent } from "../messages/presenter.ts";
import { type RedisClient, redisKeys } from "../redis/connect.ts";
import { senderCredentials } from "../senders/repository.ts";
import { applyStatusEvents, recordProviderMessageId } from "./status.ts";

/**
 * The send worker's job: hand one accepted message to the provider, exactly once.
 *
 * Before calling the provider the attempt is recorded (send_started_at); after the provider's
 * answer, its message id. A worker killed in between leaves the attempt "in doubt": the provider
 * may have sent it. The send carries our message id as Graph's biz_opaque_callback_data, which
 * every status webhook of that send echoes; so before trying again we look for such a status, and
 * only after `sendInDoubtMs` (configuration) without one do we conclude that the first attempt never arrived.
 */

export type DeliveryOutcome = "sent" | "failed" | "adopted" | "skipped";

export interface SendDeps {
  config: { workers: { sendInDoubtMs: number }; providerTokenKey: Buffer; redisPrefix: string };
  db: Db;
  /** Holds the provider-id stash (see providerIdStash). */
  redis: RedisClient;
  provider: ChannelProvider;
  clock: Clock;
  logger: Logger;
}

/** Thrown to have the queue try again later (BullMQ backoff). */
export class SendNotYetPossible extends Error {}

async function markFailed(db: Db, clock: Clock, messageId: string, failure: MessageFailure) {
  await db
    .updateTable("messages")
    .set({
      status: "failed",
      failure: JSON.stringify(failure),
      send_started_at: null,
      updated_at: clock.now(),
    })
    .where("id", "=", messageId)
    .where("status", "=", "accepted")
    .execute();
}

/** A provider id proven by a status webhook of this sender's number that echoed this message's id. */
async function echoedProviderId(db: Db, messageId: string, senderId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom("status_events")
    .select("provider_message_id")
    .where("client_reference", "=", messageId)
    .where((eb) => eb.or([eb("sender_id", "is", null), eb("sender_id", "=", senderId)]))
    .limit(1)
    .executeTakeFirst();
  return row?.provider_message_id;
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

export async function deliverOutboundMessage(
  deps: SendDeps,
  messageId: string,
  options: { finalAttempt: boolean },
): Promise<DeliveryOutcome> {
  const row = await deps.db
    .selectFrom("messages")
    .innerJoin("contacts", "contacts.id", "messages.contact_id")
    .innerJoin("senders", "senders.id", "messages.sender_id")
    .select([
      "messages.status",
      "messages.provider_message_id",
      "messages.send_started_at",
      "messages.content",
      "contacts.phone",
      "senders.id as sender_id",
      "senders.provider_phone_number_id",
      "senders.waba_id",
      "senders.access_token",
      "senders.active as sender_active",
    ])
    .where("messages.id", "=", messageId)
    .where("messages.direction", "=", "outbound")
    .executeTakeFirst();
  if (row?.status !== "accepted" || row.provider_message_id) return "skipped";

  if (!row.sender_active && !row.send_started_at) {
    // Deactivated after the message was accepted (the api's sender cache lives a few seconds).
    await markFailed(deps.db, deps.clock, messageId, {
      code: "sender_inactive",
      message: "The sender was deactivated before the message could be sent.",
      retryable: false,
    });
    return "failed";
  }

  const now = deps.clock.now();
  if (row.send_started_at) {
    // The provider accepted an earlier attempt whose id Postgres could not take (an outage).
    const stashed = await providerIdStash(deps).get(messageId);
    if (stashed) {
      await adoptProviderId(deps, messageId, stashed);
      deps.logger.info(
        { message_id: messageId, provider_message_id: stashed },
        "in-doubt send confirmed by the provider-id stash",
      );
      return "adopted";
    }
    const echoed = await echoedProviderId(deps.db, messageId, row.sender_id);
    if (echoed) {
      // The earlier attempt did reach the provider: adopt its id instead of sending again.
      await recordProviderMessageId(deps.db, deps.clock, messageId, echoed);
      await applyStatusEvents(deps.db, deps.clock, echoed);
      deps.logger.info(
        { message_id: messageId, provider_message_id: echoed },
        "in-doubt send confirmed by webhook",
      );
      return "adopted";
    }
    if (now.getTime() - row.send_started_at.getTime() < deps.config.workers.sendInDoubtMs) {
      throw new SendNotYetPossible("the previous attempt's outcome is not known yet");
    }
  }

  let credentials: SenderCredentials;
  try {
    credentials = senderCredentials(deps.config.providerTokenKey, { ...row, id: row.sender_id });
  } catch (error) {
    // The stored token does not decrypt: no retry can mend that, so fail now, nothing claimed.
    if (!(error instanceof ProviderError)) throw error;
    await markFailed(deps.db, deps.clock, messageId, {
      code: error.code,
      message: error.message,
      retryable: false,
    });
    deps.logger.error({ message_id: messageId, code: error.code }, error.message);
    return "failed";
  }

  // Claim the attempt; a twin job that claimed it first makes this one a no-op.
  const claimed = await deps.db
    .updateTable("messages")
    .set({ send_started_at: now, send_attempts: sql`send_attempts + 1` })
    .where("id", "=", messageId)
    .where("status", "=", "accepted")
    .where("provider_message_id", "is", null)
    .where((eb) =>
      eb.or([
        eb("send_started_at", "is", null),
        eb("send_started_at", "<=", new Date(now.getTime() - deps.config.workers.sendInDoubtMs)),
      ]),
    )
    .returning("send_attempts")
    .executeTakeFirst();
  if (!claimed) return "skipped";

  const payload = outboundPayload(row.content as unknown as StoredContent, row.phone, messageId);
  try {
    const { providerMessageId } = await deps.provider.sendMessage(credentials, payload);
    // Sent: from here on the id must not be forgotten, whatever Postgres does (issue 12).
    await providerIdStash(deps).put(messageId, providerMessageId, deps.logger);
    await recordUntilStored(deps, messageId, providerMessageId);
    await applyAndUnstash(deps, messageId, providerMessageId);
    return "sent";
  } catch (error) {
    if (!(error instanceof ProviderError)) throw error;
    // An answer from the provider settles the attempt; a timeout or broken connection does not.
    const answered = error.httpStatus !== undefined;
    if (answered) {
      await deps.db
        .updateTable("messages")
        .set({ send_started_at: null })
        .where("id", "=", messageId)
        .execute();
    }
    if ((error.retryable || !answered) && !options.finalAttempt) throw error;
    await markFailed(deps.db, deps.clock, messageId, {
      code: error.code,
      message: error.message,
      retryable: error.retryable,
    });
    deps.logger.warn(
      { message_id: messageId, code: error.code, attempts: claimed.send_attempts },
      "send failed for good",
    );
    return "failed";
  }
}

/** Bounds a stash command: the workers' Redis connection queues commands while Redis is away. */
const STASH_TIMEOUT_MS = 2000;
/** The Postgres record of a sent message's id is retried this often at most. */
const RECORD_RETRY_MAX_MS = 1000;

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("Command timed out (provider-id stash)")), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * The provider-id stash: a Redis hash, message id -> the provider's id, written the moment the
 * provider accepts a send and cleared once Postgres has recorded it. Postgres away at that moment,
 * the id outlives the worker: the retry (deliverOutboundMessage) and the sweeper adopt it before
 * anything is sent again. Redis restarting empty at the same time leaves only the in-doubt rule.
 */
export function providerIdStash(deps: { redis: RedisClient; config: { redisPrefix: string } }) {
  const key = redisKeys(deps.config.redisPrefix).providerIdStash();
  return {
    /** Best effort: with Redis away too, the Postgres record (retried while we live) still follows. */
    async put(messageId: string, providerMessageId: string, logger: Logger): Promise<void> {
      await withTimeout(deps.redis.hset(key, messageId, providerMessageId), STASH_TIMEOUT_MS).catch(
        (error: Error) =>
          logger.warn({ message_id: messageId, err: error.message }, "provider-id stash not written"),
      );
    },
    async get(messageId: string): Promise<string | undefined> {
      return (await withTimeout(deps.redis.hget(key, messageId), STASH_TIMEOUT_MS)) ?? undefined;
    },
    async drop(messageId: string): Promise<void> {
      await withTimeout(deps.redis.hdel(key, messageId), STASH_TIMEOUT_MS).catch(() => {});
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

/** Postgres must learn the provider id of a message the provider accepted: retried while we live. */
async function recordUntilStored(deps: SendDeps, messageId: string, providerMessageId: string) {
  for (let attempt = 0; ; attempt++) {
    try {
      await recordProviderMessageId(deps.db, deps.clock, messageId, providerMessageId);
      if (attempt > 0)
        deps.logger.info(
          { message_id: messageId, attempts: attempt + 1 },
          "provider id recorded after an outage",
        );
      return;
    } catch (error) {
      if (!isDependencyDown(error)) throw error;
      if (attempt === 0) {
        deps.logger.warn(
          { message_id: messageId, provider_message_id: providerMessageId, err: (error as Error).message },
          "sent, but Postgres cannot record the provider id yet; retrying",
        );
      }
      await Bun.sleep(Math.min(50 * 2 ** attempt, RECORD_RETRY_MAX_MS));
    }
  }
}

/** What recording a provider id takes (the sweeper has it too). */
type AdoptDeps = Pick<SendDeps, "db" | "clock" | "redis" | "logger"> & { config: { redisPrefix: string } };

/**
 * After the id is recorded: statuses that overtook the send wait in status_events for it. If
 * Postgres fails here, the sweeper applies them later (the message now has its id).
 */
async function applyAndUnstash(deps: AdoptDeps, messageId: string, providerMessageId: string) {
  try {
    await applyStatusEvents(deps.db, deps.clock, providerMessageId);
  } catch (error) {
    if (!isDependencyDown(error)) throw error;
    deps.logger.warn(
      { message_id: messageId, err: (error as Error).message },
      "statuses left to the sweeper",
    );
  }
  await providerIdStash(deps).drop(messageId);
}

/** A stashed provider id becomes the message's (the retry, the sweeper); a no-op once recorded. */
export async function adoptProviderId(
  deps: AdoptDeps,
  messageId: string,
  providerMessageId: string,
): Promise<boolean> {
  const adopted = await recordProviderMessageId(deps.db, deps.clock, messageId, providerMessageId);
  await applyAndUnstash(deps, messageId, providerMessageId);
  return adopted;
}
