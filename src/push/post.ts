import { type SignedDelivery, signDelivery } from "./signature.ts";
import type { PinnedUrl, UrlCheck } from "./url-safety.ts";

/** One POST of one event to a receiver (DESIGN §12): a 2xx within the timeout acknowledges it. */
export interface PostOutcome {
  acknowledged: boolean;
  /** The receiver's status; null when none came. */
  statusCode: number | null;
  /** Why it was not acknowledged, with at most EXCERPT_CHARS of the answer; null when it was. */
  error: string | null;
  latencyMs: number;
  timedOut: boolean;
}

/** The most of a receiver's answer that is kept (in `last_failure.error`, the attempt log). */
export const EXCERPT_CHARS = 200;
/** What is read of an answer at most: enough to reuse the connection for a usual small body. */
const READ_LIMIT_BYTES = 64 * 1024;

/** Connection errors after which the next checked address of the name is tried (nothing was sent). */
const UNREACHABLE = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);

/**
 * Posts to the checked addresses of `target` (url-safety.ts), never resolving its name again: the
 * URL names the address, the Host header and the TLS server name (SNI, certificate check) name the
 * host. Connections are reused as fetch pools them, by address and server name.
 */
export async function postDelivery(
  target: PinnedUrl,
  body: string,
  headers: SignedDelivery,
  timeoutMs: number,
): Promise<PostOutcome> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  const signal = AbortSignal.timeout(timeoutMs);
  const init: BunFetchRequestInit = {
    method: "POST",
    body,
    headers: {
      ...headers,
      "user-agent": "messaging-webhooks/1",
      ...(target.name && { host: target.name.host }),
    },
    // A redirect is not followed (it could lead anywhere): it is a failure, like Stripe's.
    redirect: "manual",
    signal,
    ...(target.name && target.url.startsWith("https:") && { tls: { serverName: target.name.serverName } }),
  };
  let via = target.via[0] ?? target.url;
  try {
    let response: Response | undefined;
    for (let i = 0; !response; i++) {
      via = target.via[i] ?? target.url;
      try {
        response = await fetch(via, init);
      } catch (error) {
        const unreachable = UNREACHABLE.has((error as { code?: string }).code ?? "");
        if (!unreachable || signal.aborted || i + 1 >= target.via.length) throw error;
      }
    }
    const latencyMs = elapsed();
    const text = await readSome(response).catch(() => "");
    if (response.status >= 200 && response.status < 300) {
      return { acknowledged: true, statusCode: response.status, error: null, latencyMs, timedOut: false };
    }
    const excerpt = text.slice(0, EXCERPT_CHARS).trim();
    return {
      acknowledged: false,
      statusCode: response.status,
      error: `HTTP ${response.status}${excerpt ? `: ${excerpt}` : ""}`,
      latencyMs,
      timedOut: false,
    };
  } catch (error) {
    const timedOut = signal.aborted;
    // fetch's message may quote the URL it was given: the endpoint's, not the address it led to.
    const message = (error as Error).message.replaceAll(via, target.url);
    return {
      acknowledged: false,
      statusCode: null,
      error: timedOut
        ? `no answer within ${timeoutMs / 1000} s`
        : `could not connect: ${message}`.slice(0, EXCERPT_CHARS),
      latencyMs: elapsed(),
      timedOut,
    };
  }
}

/**
 * One delivery of `body` as event `id` at `at` (a run's, or the panel's test event): signed by every
 * secret in force, posted to the addresses `destination` checked, and not posted at all when it
 * refused the URL.
 */
export function deliverEvent(
  target: { destination: UrlCheck; secrets: readonly string[]; timeoutMs: number },
  id: string,
  body: string,
  at: Date,
): Promise<PostOutcome> {
  const { pinned, problem } = target.destination;
  if (!pinned) {
    return Promise.resolve({
      acknowledged: false,
      statusCode: null,
      error: `not posted: url ${problem}`,
      latencyMs: 0,
      timedOut: false,
    });
  }
  return postDelivery(pinned, body, signDelivery(id, body, at, target.secrets), target.timeoutMs);
}

/** The start of the answer's body (at most READ_LIMIT_BYTES, the rest discarded). */
async function readSome(response: Response): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < READ_LIMIT_BYTES) {
    const { done, value } = await reader.read();
    if (done) return new TextDecoder().decode(Buffer.concat(chunks));
    chunks.push(value);
    size += value.length;
  }
  await reader.cancel();
  return new TextDecoder().decode(Buffer.concat(chunks)).slice(0, EXCERPT_CHARS * 4);
}
