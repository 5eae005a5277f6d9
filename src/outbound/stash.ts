import { withTimeout } from "../lib/with-timeout.ts";
import type { Logger } from "../logger.ts";
import { type RedisClient, redisKeys } from "../redis/connect.ts";

/** Bounds a stash command: the workers' Redis connection queues commands while Redis is away. */
const STASH_TIMEOUT_MS = 2000;

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
