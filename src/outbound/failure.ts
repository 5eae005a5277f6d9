import { failureOf, ProviderError } from "../channel/provider.ts";
import type { MessageFailure } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import { SEND_ATTEMPTS } from "../queues/index.ts";
import { type Claimed, pairOf } from "./claim.ts";
import { EXPIRED } from "./expire.ts";
import type { Settled } from "./record.ts";

/**
 * The send's failure policy: what fails a claimed message before any provider call, and what the
 * provider's answer (or its absence) makes of an attempt: a retry when (with its backoff), or a
 * failure for good.
 */

/** Throttled sends back off exponentially up to this. */
const THROTTLE_BACKOFF_CAP_MS = 60_000;

/** A message whose sender was deactivated before it could be sent. */
export const SENDER_INACTIVE: MessageFailure = {
  code: "sender_inactive",
  message: "The sender was deactivated before the message could be sent.",
  retryable: false,
};

/**
 * Why a claimed message must not go out (DESIGN §13), in the order the contract ranks them: it is
 * failed at the claim instead, nothing sent.
 */
export function refusalAtClaim(row: Claimed): MessageFailure | undefined {
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

function backoffMs(base: number, failures: number, cap = Number.POSITIVE_INFINITY): number {
  return Math.min(base * 2 ** Math.max(0, failures - 1), cap);
}

/** What the provider's answer (or its absence) means for one claimed message. */
export function settleFailure(
  deps: { config: { workers: { sendRetryBaseMs: number } }; logger: Logger },
  row: Claimed,
  error: unknown,
  now: number,
): Settled {
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
