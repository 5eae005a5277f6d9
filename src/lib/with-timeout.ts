/**
 * `promise`, or a rejection with `message` after `ms`; the timer is cleared either way, so a
 * finished call leaves nothing behind (probes and stash writes run often).
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, message = "timed out"): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(message)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
