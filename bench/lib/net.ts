/** Ports and readiness of the processes a bench starts. */

/** A free TCP port. The api and the simulator bind 0.0.0.0 themselves, so it must be free there. */
export function freePort(): number {
  const listener = Bun.listen({ hostname: "0.0.0.0", port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

/**
 * Waits until `url` answers 2xx, polling every `intervalMs`; throws after `timeoutMs`, or at once
 * when `check` throws (a process it waits for has died).
 */
export async function waitHttp(
  url: string,
  what: string,
  options: { timeoutMs?: number; intervalMs?: number; check?: () => void } = {},
): Promise<void> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    options.check?.();
    try {
      if ((await fetch(url, { signal: AbortSignal.timeout(1000) })).ok) return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`${what} did not answer ${url} within ${timeoutMs} ms`);
    await Bun.sleep(options.intervalMs ?? 100);
  }
}
