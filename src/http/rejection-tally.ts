/**
 * Counts refused requests per address in this process, in fixed windows, so a caller that keeps
 * sending what we refuse (unsigned webhooks) is turned away before its next body is read. Kept in
 * memory on purpose: it guards this process's CPU, costs no round trip, and each replica guards its
 * own. Bounded: when full, the oldest windows go first.
 */
export interface RejectionTally {
  record(address: string): void;
  /**
   * Whether the caller has been refused too often. `addressOf` is asked only while some address
   * is counted: finding a request's address is a system call, and nearly always nothing is.
   */
  exceeded(addressOf: () => string): boolean;
  retryAfterSeconds(address: string): number;
}

const MAX_ADDRESSES = 10_000;

export function createRejectionTally(options: {
  limit: number;
  windowMs: number;
  now?: () => number;
}): RejectionTally {
  const now = options.now ?? Date.now;
  const windows = new Map<string, { startedAt: number; count: number }>();
  const current = (address: string) => {
    const window = windows.get(address);
    if (window && now() - window.startedAt < options.windowMs) return window;
    if (window) windows.delete(address);
    return undefined;
  };
  return {
    record(address) {
      const window = current(address);
      if (window) window.count++;
      else {
        if (windows.size >= MAX_ADDRESSES) {
          const oldest = windows.keys().next().value;
          if (oldest !== undefined) windows.delete(oldest);
        }
        windows.set(address, { startedAt: now(), count: 1 });
      }
    },
    exceeded(addressOf) {
      return windows.size > 0 && (current(addressOf())?.count ?? 0) >= options.limit;
    },
    retryAfterSeconds(address) {
      const window = current(address);
      return window ? Math.max(1, Math.ceil((window.startedAt + options.windowMs - now()) / 1000)) : 1;
    },
  };
}
