import type { RedisClient } from "../redis/connect.ts";
import { serviceUnavailable } from "./dependency-faults.ts";
import { ApiError } from "./errors.ts";

/** SPEC §8 defaults, per second. */
export const DEFAULT_LIMITS = { read: 5, send: 3, token: 2 } as const;

/**
 * Per-IP limits per second beyond SPEC's: the token endpoint before its body is read (several
 * applications may share an address), the panel (a page is several requests, and each open page
 * polls) and the operator endpoints (the queue dashboard polls).
 */
export const IP_LIMITS = { token: 10, panel: 30, ops: 20 } as const;

export interface RateLimitOutcome {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Milliseconds until the current one-second window ends. */
  resetMs: number;
  /** Unix epoch second at which the next window starts. */
  resetEpoch: number;
}

/** One round trip: scripts/rate_limit.lua. Redis unreachable -> 503, never a silent pass. */
export async function consumeRateLimit(
  redis: RedisClient,
  key: string,
  limit: number,
): Promise<RateLimitOutcome> {
  let reply: [number, number, number, number, number];
  try {
    reply = await redis.rateLimit(key, limit);
  } catch {
    // Any failure of our own script's call is Redis not answering as it should: never a silent pass.
    throw serviceUnavailable();
  }
  const [allowed, max, remaining, resetMs, resetEpoch] = reply;
  return { allowed: allowed === 1, limit: max, remaining, resetMs, resetEpoch };
}

/**
 * Both header families (SPEC §8): RateLimit-Reset is seconds to go, X-RateLimit-Reset an epoch second.
 * RateLimit-Policy (`<limit>;w=1`, IETF draft syntax) names the quota so a client can pace itself
 * before the first 429.
 */
export function rateLimitHeaders(outcome: RateLimitOutcome): Record<string, string> {
  const limit = String(outcome.limit);
  const remaining = String(outcome.remaining);
  return {
    "ratelimit-policy": `${limit};w=1`,
    "ratelimit-limit": limit,
    "ratelimit-remaining": remaining,
    "ratelimit-reset": String(Math.max(1, Math.ceil(outcome.resetMs / 1000))),
    "x-ratelimit-limit": limit,
    "x-ratelimit-remaining": remaining,
    "x-ratelimit-reset": String(outcome.resetEpoch),
  };
}

export function retryAfterSeconds(outcome: RateLimitOutcome): string {
  return String(Math.max(1, Math.ceil(outcome.resetMs / 1000)));
}

/** The 429 of a per-second limit; `message` lets a caller word it for its audience (the panel). */
export function rateLimitError(
  outcome: RateLimitOutcome,
  message = `Too many requests: the limit is ${outcome.limit} per second.`,
): ApiError {
  return new ApiError("rate_limit_exceeded", message, {
    headers: { "retry-after": retryAfterSeconds(outcome) },
  });
}
