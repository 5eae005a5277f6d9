/**
 * How a request's path is read. The pipeline, the routes and the router must read one request the
 * same way: `pathOf` is the reading of everything of ours, `routerPathOf` Elysia's (its compiled
 * fetch handler takes the path from the first `/` after the scheme and host), and a request on which
 * the two disagree is refused before any work (src/pipeline/request-pipeline.ts).
 */

export const API_PREFIX = "/v2";

/**
 * Elysia's reading depends on its `handler.standardHostname` option: on (its default), it assumes a
 * host of at least four characters and starts at index 11, so `Host: a` turned `/v2/v2/messages` into
 * `/v2/messages`. Off, it starts right after `http://`, which is right for every host; the app sets it
 * off (src/app.ts) and the pipeline checks that both readings still agree.
 */
export const ROUTER_STANDARD_HOSTNAME = false;

/** The path of a URL as we read it: after the authority, without query or fragment, no trailing `/`. */
export function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  const end = url.search(/[?#]/);
  const path = end < 0 ? url.slice(start) : url.slice(start, end);
  return withoutTrailingSlash(path);
}

/** The path Elysia's router reads from the same URL (see ROUTER_STANDARD_HOSTNAME). */
export function routerPathOf(url: string): string {
  const start = url.indexOf("/", ROUTER_STANDARD_HOSTNAME ? 11 : 7);
  if (start < 0) return "/";
  const query = url.indexOf("?", start + 1);
  return withoutTrailingSlash(query < 0 ? url.slice(start) : url.slice(start, query));
}

// Elysia routes `/x/` to `/x` (strictPath off), so both readings treat them as one path.
function withoutTrailingSlash(path: string): string {
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

export function capText(text: string, max = 500): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length} characters)` : text;
}
