import type { Item } from "./delivery-window.ts";

/** The longest retry delay (DESIGN §12), and how long an event may fail before the endpoint is disabled. */
const RETRY_CAP_MS = 3600_000;
export const GIVE_UP_AFTER_MS = 3 * 86_400_000;

/** The delay before attempt `attempts + 1`: base doubling, capped at an hour, ±20 % jitter. */
export function retryDelayMs(baseMs: number, attempts: number, random = Math.random): number {
  const nominal = Math.min(RETRY_CAP_MS, baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.min(RETRY_CAP_MS, Math.round(nominal * (0.8 + 0.4 * random())));
}

/**
 * An attempt of `item` failed `at`: its next attempt is due after the backoff (the window holds it
 * until then: DeliveryWindow.retryLater). Returns whether it has been failing for GIVE_UP_AFTER_MS
 * (the endpoint is then disabled as failing).
 */
export function scheduleRetry(item: Item, at: Date, retryBaseMs: number): boolean {
  item.dirty = true;
  item.attempts++;
  item.firstFailedAt ??= at;
  item.nextAttemptAt = new Date(at.getTime() + retryDelayMs(retryBaseMs, item.attempts));
  return at.getTime() - item.firstFailedAt.getTime() >= GIVE_UP_AFTER_MS;
}
