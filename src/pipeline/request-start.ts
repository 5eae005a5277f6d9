import { ApiError } from "../http/errors.ts";
import { pathOf, routerPathOf } from "../http/paths.ts";
import { type RequestState, setRequestState } from "../http/request-state.ts";
import { newId } from "../ids.ts";
import type { ResponseSet } from "./pipeline-deps.ts";

type Server = { requestIP(request: Request): { address: string } | null } | null;

/**
 * A request's start, before routing: its id (the `Request-Id` header) and state, the client's
 * address, and the refusal of a request the router and we would read apart.
 */
export function startRequest(request: Request, set: ResponseSet, server: Server, trustProxy: number): void {
  let clientIp: string | undefined;
  const state: RequestState = {
    requestId: newId("req"),
    startedAt: performance.now(),
    tokenGiven: false,
    clientIp: () => {
      clientIp ??= clientIpOf(request, server, trustProxy);
      return clientIp;
    },
  };
  setRequestState(request, state);
  set.headers["request-id"] = state.requestId;
  // The router and everything of ours must read one path; a request they would read apart is
  // refused before any work: a Host Bun cannot put in a URL (`a/b`, `a?b`, empty: the URL
  // then has no authority) or a `#` in the request target.
  const url = request.url;
  if (!(url.startsWith("http://") || url.startsWith("https://")) || pathOf(url) !== routerPathOf(url)) {
    throw new ApiError(
      "parameter_invalid",
      "The request's Host header or path could not be read unambiguously.",
    );
  }
}

/**
 * The client's address. With `trustProxy` = N proxies of ours in front, each appends the address it
 * saw to X-Forwarded-For, so the client is the Nth entry from the right; everything left of it is
 * whatever the client chose to send. A header with fewer than N entries (the request came through
 * fewer proxies than configured) gives its leftmost entry; no header at all, the socket address.
 */
export function clientIpOf(request: Request, server: Server, trustProxy: number): string {
  if (trustProxy > 0) {
    const hops = (request.headers.get("x-forwarded-for") ?? "")
      .split(",")
      .map((hop) => hop.trim())
      .filter((hop) => hop !== "");
    const client = hops[Math.max(0, hops.length - trustProxy)];
    if (client) return client.slice(0, 64);
  }
  return server?.requestIP(request)?.address ?? "local";
}
