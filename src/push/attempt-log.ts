import { withTimeout } from "../lib/with-timeout.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import type { PostOutcome } from "./post.ts";

/**
 * The last deliveries to each endpoint (the panel's "last deliveries"): a short list in Redis, newest
 * first. Diagnostics only: Postgres holds what delivery needs, so a Redis that restarts empty only
 * forgets this list.
 */
export interface DeliveryAttempt {
  /** Unix milliseconds of the answer (or of giving up). */
  at: number;
  event_id: string;
  type: string;
  /** The receiver's HTTP status; null when none came (timeout, refused connection or address). */
  status_code: number | null;
  latency_ms: number;
  outcome: "acknowledged" | "failed";
  /** What went wrong, with a short excerpt of the answer; null on success. */
  error: string | null;
}

export const ATTEMPTS_KEPT = 50;
/**
 * A write of the log waits at most this long. A worker's Redis connection waits for Redis forever
 * (BullMQ's setting), and a delivery run writes the log at every flush of its progress: unbounded,
 * a Redis that never answered would hold the run, its job and its endpoint's deliveries for good.
 */
const ATTEMPT_LOG_TIMEOUT_MS = 2000;

/** The log's entry for one post of event `eventId` of `type`, answered (or given up) `at`. */
export function attemptOf(eventId: string, type: string, outcome: PostOutcome, at: Date): DeliveryAttempt {
  return {
    at: at.getTime(),
    event_id: eventId,
    type,
    status_code: outcome.statusCode,
    latency_ms: outcome.latencyMs,
    outcome: outcome.acknowledged ? "acknowledged" : "failed",
    error: outcome.error,
  };
}

export async function recordAttempts(
  redis: RedisClient,
  keys: Pick<RedisKeys, "webhookAttempts">,
  endpointId: string,
  attempts: readonly DeliveryAttempt[],
): Promise<void> {
  if (attempts.length === 0) return;
  const key = keys.webhookAttempts(endpointId);
  const newest = attempts.slice(-ATTEMPTS_KEPT).map((attempt) => JSON.stringify(attempt));
  // A write given up on that fails later is not an unhandled rejection: the race has handled it.
  await withTimeout(
    redis
      .multi()
      .lpush(key, ...newest)
      .ltrim(key, 0, ATTEMPTS_KEPT - 1)
      .pexpire(key, 30 * 86_400_000)
      .exec(),
    ATTEMPT_LOG_TIMEOUT_MS,
    "attempt log write timed out",
  );
}

export async function recentAttempts(
  redis: RedisClient,
  keys: Pick<RedisKeys, "webhookAttempts">,
  endpointId: string,
  count = ATTEMPTS_KEPT,
): Promise<DeliveryAttempt[]> {
  const rows = await redis.lrange(keys.webhookAttempts(endpointId), 0, count - 1);
  return rows.map((row) => JSON.parse(row) as DeliveryAttempt);
}
