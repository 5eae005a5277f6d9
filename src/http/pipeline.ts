import { Elysia } from "elysia";
import { newId } from "../ids.ts";
import type { Logger } from "../logger.ts";
import { type AdmitSend, enforceAdmission, giveBackQuotaUnit } from "../messages/admission.ts";
import type { Metrics, RateLimitKind } from "../metrics/index.ts";
import type { TokenService } from "../oauth/tokens.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import { ApiError, apiErrorBody, OAuthError, oauthErrorBody } from "./errors.ts";
import { consumeRateLimit, rateLimitError, rateLimitHeaders } from "./rate-limit.ts";
import { type RequestState, requestState, setRequestState } from "./request-state.ts";
import { validationToApiError } from "./validation.ts";

export const API_PREFIX = "/v2";
export const TOKEN_PATH = `${API_PREFIX}/oauth/token`;
/** JSON and form bodies; files go through POST /media with its own limit. */
export const JSON_BODY_LIMIT = 1024 * 1024;
export const MEDIA_BODY_LIMIT = 16 * 1024 * 1024 + 64 * 1024;
export const MESSAGES_PATH = `${API_PREFIX}/messages`;
const MEDIA_PATH = `${API_PREFIX}/media`;

export interface PipelineDeps {
  publicBaseUrl: string;
  trustProxy: boolean;
  redis: RedisClient;
  keys: RedisKeys;
  tokens: TokenService;
  logger: Logger;
  metrics: Metrics;
  /** Requests per second for callers without a valid token, per IP. */
  anonymousLimit: number;
  /** Rate limit and daily quota of POST /messages, in one Redis call. */
  admitSend: AdmitSend;
  /**
   * Static files under the prefix (the reference page and its assets): a GET of one of these exact
   * paths skips authentication and the rate limit. A page load is several requests, and must not use
   * up the anonymous limit before the API is tried.
   */
  staticPaths: ReadonlySet<string>;
  /** Paths answered with HTML pages (the panel): their errors are pages too, not JSON envelopes. */
  pageErrors?: { prefix: string; render(failure: ApiError | OAuthError, requestId: string): Response };
}

interface RouteInfo {
  method: string;
  path: string;
}

/**
 * The shared HTTP concerns, once for every route: request id, body parsing with a size cap,
 * authentication and rate limiting before routing (so 404s and 401s are limited and carry the
 * headers too), one error renderer, and the access log.
 */
export function requestPipeline(deps: PipelineDeps, routes: () => readonly RouteInfo[]) {
  const { allowedMethods, templateOf } = routeIndex(routes);

  return (
    new Elysia()
      // Requests not yet answered (graceful shutdown waits for them; see src/server.ts).
      .state("inFlight", 0)
      .onRequest(async ({ request, set, server, store }) => {
        store.inFlight++;
        const state: RequestState = {
          requestId: newId("req"),
          startedAt: performance.now(),
          tokenGiven: false,
        };
        setRequestState(request, state);
        set.headers["request-id"] = state.requestId;

        const path = pathOf(request.url);
        if (!path.startsWith(`${API_PREFIX}/`)) return;

        const declared = Number(request.headers.get("content-length") ?? 0);
        if (declared > (path === MEDIA_PATH ? MEDIA_BODY_LIMIT : JSON_BODY_LIMIT)) {
          throw path === MEDIA_PATH
            ? new ApiError("file_too_large", "Files may be at most 16 MB.", { param: "file" })
            : new ApiError("request_too_large", "The request body may be at most 1 MB.");
        }
        // The token endpoint limits itself: its key is the client_id, which is inside the body.
        if (path === TOKEN_PATH) return;
        // Static files (see PipelineDeps.staticPaths).
        if (request.method === "GET" && deps.staticPaths.has(path)) return;

        const header = request.headers.get("authorization");
        let auth: Awaited<ReturnType<TokenService["check"]>> | undefined;
        if (header !== null) {
          state.tokenGiven = true;
          const bearer = /^Bearer +([^\s]+) *$/i.exec(header);
          auth = bearer?.[1] ? await deps.tokens.check(bearer[1]) : { ok: false, problem: "malformed" };
          Object.assign(state, auth.ok ? { auth: auth.auth } : { authProblem: auth.problem });
        }

        if (auth?.ok === true && path === MESSAGES_PATH && request.method === "POST") {
          const admission = await deps.admitSend(auth.auth);
          Object.assign(set.headers, rateLimitHeaders(admission.rate));
          state.reservedQuotaKey = enforceAdmission(admission, deps.metrics);
          return;
        }
        // The application's send or read limit; callers without a valid token share their IP's.
        const kind = path === MEDIA_PATH && request.method === "POST" ? "send" : "read";
        const [key, limit] =
          auth?.ok === true
            ? [
                deps.keys.applicationRate(auth.auth.tenantId, auth.auth.clientId, kind),
                kind === "send" ? auth.auth.sendLimit : auth.auth.readLimit,
              ]
            : [deps.keys.ipRate(clientIpOf(request, server, deps.trustProxy), "read"), deps.anonymousLimit];
        const outcome = await consumeRateLimit(deps.redis, key, limit);
        Object.assign(set.headers, rateLimitHeaders(outcome));
        if (!outcome.allowed) {
          deps.metrics.rateLimited.inc({
            kind: (auth?.ok === true ? kind : "anonymous") satisfies RateLimitKind,
          });
          throw rateLimitError(outcome);
        }
      })

      // A body that cannot be read is recorded, not thrown: the caller's credentials are judged first
      // (the scope guard raises it after authorizing), so a bad token is a 401 whatever the body.
      .onParse({ as: "global" }, async ({ request }) => {
        const type = mediaType(request.headers.get("content-type"));
        if (type === "multipart/form-data") return; // routes that take files read them themselves
        const state = requestState(request);
        try {
          return parseBody(type, await readBodyCapped(request, JSON_BODY_LIMIT), state);
        } catch (error) {
          if (!(error instanceof ApiError) || !state) throw error;
          state.bodyProblem = error;
          return null;
        }
      })

      .onError({ as: "global" }, async ({ code, error, request, set, path }) => {
        const state = requestState(request);
        // Before the answer leaves, so the client's next send already sees the unit back.
        await returnReservedQuota(deps.redis, state);
        const requestId = state?.requestId ?? newId("req");
        set.headers["request-id"] = requestId;

        // Elysia wraps what a parse hook throws in a ParseError; ours is the cause.
        const cause = code === "PARSE" ? (error as { cause?: unknown }).cause : undefined;
        let failure: ApiError | OAuthError;
        if (error instanceof ApiError || error instanceof OAuthError) failure = error;
        else if (cause instanceof ApiError) failure = cause;
        else if (code === "VALIDATION") failure = validationToApiError(error as never);
        else if (code === "PARSE")
          failure = new ApiError("parameter_invalid", "The request body could not be parsed.");
        else if (code === "NOT_FOUND") {
          const allowed = allowedMethods(path);
          failure =
            allowed.length > 0 && !allowed.includes(request.method)
              ? new ApiError("method_not_allowed", `${request.method} is not allowed on ${path}.`, {
                  headers: { allow: allowed.join(", ") },
                })
              : unknownPathError(request.method, path);
        } else if (isDependencyDown(error)) {
          deps.logger.warn({ request_id: requestId, err: errorSummary(error) }, "dependency unavailable");
          failure = new ApiError(
            "service_unavailable",
            "The service is briefly unavailable. Retry shortly.",
            {
              headers: { "retry-after": "2" },
            },
          );
        } else {
          deps.logger.error({ request_id: requestId, err: error, path }, "unhandled error");
          failure = new ApiError("internal_error", "An internal error occurred. It has been logged.");
        }

        if (path === TOKEN_PATH && failure instanceof ApiError) failure = toOAuthError(failure);
        if (state) state.status = failure.status;
        const pages = deps.pageErrors;
        if (pages && (path === pages.prefix || path.startsWith(`${pages.prefix}/`)))
          return pages.render(failure, requestId);
        set.status = failure.status;
        Object.assign(set.headers, failure.headers);
        if (failure instanceof OAuthError) {
          set.headers["cache-control"] = "no-store";
          return oauthErrorBody(failure, requestId);
        }
        return apiErrorBody(failure, requestId, deps.publicBaseUrl);
      })

      .onAfterResponse({ as: "global" }, ({ request, set, path, route, responseValue, store }) => {
        store.inFlight--;
        const state = requestState(request);
        if (!state) return;
        const status =
          state.status ??
          (responseValue instanceof Response
            ? responseValue.status
            : typeof set.status === "number"
              ? set.status
              : 200);
        const seconds = (performance.now() - state.startedAt) / 1000;
        // The matched route's template, never the raw path: ids in paths would be unbounded series.
        const template = route || templateOf(request.method, path) || "unmatched";
        const labels = { method: request.method, route: template, status: String(status) };
        deps.metrics.httpRequests.inc(labels);
        deps.metrics.httpRequestDuration.observe(labels, seconds);
        deps.logger.info(
          {
            request_id: state.requestId,
            method: request.method,
            route: template,
            path,
            status,
            duration_ms: Math.round(seconds * 100_000) / 100,
            tenant: state.auth?.tenantId ?? null,
            application: state.auth?.clientId ?? state.tokenClientId ?? null,
          },
          "request",
        );
      })
  );
}

function parseBody(type: string, raw: Uint8Array, state: RequestState | undefined): unknown {
  if (state) state.rawBody = raw;
  const text = new TextDecoder().decode(raw);
  if (type === "application/json" || type.endsWith("+json")) {
    if (text.trim() === "") return null;
    try {
      return JSON.parse(text);
    } catch {
      throw new ApiError("invalid_json", "The request body is not valid JSON.");
    }
  }
  if (type === "application/x-www-form-urlencoded") return formToObject(text);
  if (text.length === 0) return null;
  throw new ApiError(
    "invalid_content_type",
    `Content-Type ${type || "(none)"} is not accepted here; send application/json.`,
  );
}

/** Only accepted sends count against the daily quota: a request that created none gives its unit back. */
export async function returnReservedQuota(
  redis: RedisClient,
  state: RequestState | undefined,
): Promise<void> {
  const key = state?.reservedQuotaKey;
  if (!key || state.accepted) return;
  state.reservedQuotaKey = undefined;
  await giveBackQuotaUnit(redis, key);
}

/** Raises a body problem the parser recorded (see onParse). */
export function throwBodyProblem(request: Request): void {
  const problem = requestState(request)?.bodyProblem;
  if (problem) throw problem;
}

function toOAuthError(error: ApiError): OAuthError {
  if (error.code === "rate_limit_exceeded")
    return new OAuthError("rate_limit_exceeded", error.message, error.headers);
  // Keep the status: a dependency outage stays a 503 with Retry-After, not a 500.
  if (error.status >= 500) return new OAuthError("server_error", error.message, error.headers, error.status);
  // Keeps 405/413 honest while speaking the token endpoint's error shape.
  return new OAuthError("invalid_request", error.message, error.headers, error.status);
}

/** What any path that does not exist answers (the ops endpoints reuse it for theirs). */
export function unknownPathError(method: string, path: string): ApiError {
  return new ApiError("resource_missing", `Unknown path: ${method} ${path}.`);
}

export function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  const end = url.search(/[?#]/);
  return end < 0 ? url.slice(start) : url.slice(start, end);
}

function mediaType(header: string | null): string {
  return (header ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

function formToObject(text: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const prior = out[key];
    out[key] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value];
  }
  return out;
}

/** Reads a body without ever holding more than `limit` bytes (chunked bodies have no Content-Length). */
async function readBodyCapped(request: Request, limit: number): Promise<Uint8Array> {
  if (!request.body) return new Uint8Array();
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw new ApiError("request_too_large", "The request body may be at most 1 MB.");
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

export function clientIpOf(
  request: Request,
  server: { requestIP(request: Request): { address: string } | null } | null,
  trustProxy: boolean,
): string {
  if (trustProxy) {
    const forwarded = request.headers.get("x-forwarded-for")?.split(",")[0]?.trim();
    if (forwarded) return forwarded.slice(0, 64);
  }
  return server?.requestIP(request)?.address ?? "local";
}

/**
 * Route lookups for answers given without a matched route: the methods a path takes (405's Allow),
 * and the template a request would have matched, for requests answered before routing (a 429 or 401
 * from onRequest), so metrics never label a series by a raw path. Patterns are compiled on first use
 * (the routes are known once the app is whole), most specific (fewest parameters) first.
 */
function routeIndex(routes: () => readonly RouteInfo[]) {
  let compiled: { regex: RegExp; method: string; path: string }[] | undefined;
  const patterns = () =>
    (compiled ??= routes()
      .map((route) => ({
        method: route.method,
        path: route.path,
        params: route.path.split(":").length - 1,
        regex: new RegExp(
          `^${route.path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[^/]+/g, "[^/]+")}/?$`,
        ),
      }))
      .sort((a, b) => a.params - b.params));
  return {
    allowedMethods: (path: string): string[] => [
      ...new Set(
        patterns()
          .filter((p) => p.regex.test(path))
          .map((p) => p.method),
      ),
    ],
    templateOf: (method: string, path: string): string | undefined =>
      patterns().find((p) => (p.method === method || p.method === "ALL") && p.regex.test(path))?.path,
  };
}

const DOWN_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "ENOTFOUND",
  "57P01",
  "57P03",
  "08001",
  "08006",
]);

/** Postgres or Redis unreachable (as opposed to a bug): answered with 503 and Retry-After. */
export function isDependencyDown(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: string }).code;
  if (code && DOWN_CODES.has(code)) return true;
  return /Connection terminated|timeout exceeded when trying to connect|Connection is closed|Stream isn't writeable|connect ECONNREFUSED|Command timed out|Query read timeout/i.test(
    error.message,
  );
}

function errorSummary(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
