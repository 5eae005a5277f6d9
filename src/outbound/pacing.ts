import { type RedisClient, redisKeys } from "../redis/connect.ts";

/**
 * A sender's pace: its messages per second (`senders.mps`), a token bucket in Redis shared by every
 * worker process, and how many provider calls one chunk has in flight at once.
 */

/** Provider calls in flight at once for one chunk of a batch. */
export const CALLS_IN_FLIGHT = 100;
/** A chunk never asks for more tokens than this, whatever the sender's pace. */
const MAX_CHUNK = 500;

/**
 * How many of `waiting` messages of `sender` may go now: as many as the sender's bucket grants (never
 * more than its mps, nor MAX_CHUNK), waiting for the first token when it grants none.
 */
export async function takeTokens(
  deps: { redis: RedisClient; config: { redisPrefix: string } },
  sender: { sender_id: string; mps: number },
  waiting: number,
): Promise<number> {
  const key = redisKeys(deps.config.redisPrefix).sendTokens(sender.sender_id);
  for (;;) {
    const wanted = Math.min(waiting, sender.mps, MAX_CHUNK);
    const [granted, waitMs] = await deps.redis.takeSendTokens(
      key,
      sender.mps,
      wanted,
      Math.max(1, Math.ceil(sender.mps / 10)),
    );
    if (granted > 0) return granted;
    await Bun.sleep(waitMs);
  }
}

/** Runs `task` over `items` with at most `limit` in flight. */
export async function inPool<T, R>(
  items: readonly T[],
  limit: number,
  task: (item: T) => Promise<R>,
): Promise<R[]> {
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
