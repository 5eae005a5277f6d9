import type { TSchema } from "@sinclair/typebox";
import { Elysia } from "elysia";
import { newId } from "../ids.ts";
import type { Logger } from "../logger.ts";
import type { AdmitSend } from "../messages/admission.ts";
import { KEY_FORMAT } from "../messages/idempotency.ts";
import type { Metrics, RateLimitKind } from "../metrics/index.ts";
import type { TokenService } from "../oauth/tokens.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import {
  bodyPolicyOf,
  declaredTooLarge,
  mediaType,
  parseBodyBytes,
  readBodyCapped,
  tooLargeError,
} from "./body.ts";
import { isDependencyDown } from "./dependency-faults.ts";
import { ApiError, apiErrorBody, OAuthError, oauthErrorBody } from "./errors.ts";
import { consumeRateLimit, rateLimitError, rateLimitHeaders } from "./rate-limit.ts";
import { createRejectionTally } from "./rejection-tally.ts";
import { type RequestState, requestState, setRequestState } from "./request-state.ts";
import { bodyValidationProblem, validationToApiError } from "./validation.ts";

export const API_PREFIX = "/v2";
export const TOKEN_PATH = `${API_PREFIX}/oauth/token`;
export const MESSAGES_PATH = `${API_PREFIX}/messages`;
const MEDIA_PATH = `${API_PREFIX}/media`;
const WEBHOOKS_PREFIX = "/webhooks";
const BODY_PATHS = { api: API_PREFIX, media: MEDIA_PATH, webhooks: WEBHOOKS_PREFIX };
/**
 * A webhook caller whose requests keep failing the signature (or the body) check is refused before
 * its next body is read, for the rest of the minute. The provider's own signed traffic is never
 * counted: it is not limited here, however heavy.
 */
const WEBHOOK_REJECTIONS_PER_MINUTE = 20;

export interface PipelineDeps {
  publicBaseUrl: string;
  /** Proxies of ours in front (see clientIpOf). */
  trustProxy: number;
  redis: RedisClient;
  keys: RedisKeys;
  tokens: TokenService;
  logger: Logger;
  metrics: Metrics;
  /**
   * Per-IP requests per second: callers of /v2 without a valid token (`anonymous`), the token
   * endpoint (`token`, before the body is read, besides its per-client limit), the panel and the
   * operator endpoints.
   */
  ipLimits: { anonymous: number; token: number; panel: number; ops: number };
  /** Path prefixes of the panel and the operator endpoints (their per-IP limits). */
  panelPrefix: string;
  opsPrefixes: readonly string[];
  /** The admission of POST /messages (src/messages/admission.ts): its limits, in one Redis call. */
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
  /** Elysia's route hooks; `body` is the route's schema, when it declares one. */
  hooks?: unknown;
}

/**
 * The shared HTTP concerns, once for every route: request id, body parsing with a size cap,
 * authentication and rate limiting before routing (so 404s and 401s are limited and carry the
 * headers too), one error renderer, and the access log.
 */
export function requestPipeline(deps: PipelineDeps, routes: () => readonly RouteInfo[]) {
  const { allowedMethods, templateOf, bodySchemaOf } = routeIndex(routes);
  const webhookRejections = createRejectionTally({ limit: WEBHOOK_REJECTIONS_PER_MINUTE, windowMs: 60_000 });
  /** One per-IP limit: 429 with the headers, counted under `kind`. */
  const limitIp = async (
    set: { headers: Record<string, unknown> },
    ip: string,
    kind: "token" | "panel" | "ops",
  ) => {
    const outcome = await consumeRateLimit(deps.redis, deps.keys.ipRate(ip, kind), deps.ipLimits[kind]);
    Object.assign(set.headers, rateLimitHeaders(outcome));
    if (!outcome.allowed) {
      deps.metrics.rateLimited.inc({ kind });
      throw rateLimitError(outcome);
    }
  };

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
        state.clientIp = clientIpOf(request, server, deps.trustProxy);
        // Limits that need no body come first: a refused request is never read, let alone parsed.
        if (path.startsWith(`${WEBHOOKS_PREFIX}/`) && webhookRejections.exceeded(state.clientIp)) {
          throw new ApiError("rate_limit_exceeded", "Too many rejected webhook requests from this address.", {
            headers: { "retry-after": String(webhookRejections.retryAfterSeconds(state.clientIp)) },
          });
        }
        state.bodyPolicy = bodyPolicyOf(path, BODY_PATHS);
        if (declaredTooLarge(request, state.bodyPolicy)) throw tooLargeError(state.bodyPolicy);
        if (path === deps.panelPrefix || path.startsWith(`${deps.panelPrefix}/`))
          return limitIp(set, state.clientIp, "panel");
        if (deps.opsPrefixes.some((prefix) => path === prefix || path.startsWith(`${prefix}/`)))
          return limitIp(set, state.clientIp, "ops");
        if (!path.startsWith(`${API_PREFIX}/`)) return;
        // The token endpoint's per-IP limit, before its body is read; its per-client limit (the
        // client_id is in the body) and the failed-authentication count are the route's.
        if (path === TOKEN_PATH) return limitIp(set, state.clientIp, "token");
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
          // The Idempotency-Key is claimed in the same Redis call; a malformed one is the route's 400.
          const key = request.headers.get("idempotency-key");
          const admission = await deps.admitSend(
            auth.auth,
            key !== null && KEY_FORMAT.test(key) ? { key, token: state.requestId } : undefined,
          );
          Object.assign(set.headers, rateLimitHeaders(admission.rate));
          state.admittedSend = admission;
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
            : [deps.keys.ipRate(state.clientIp, "read"), deps.ipLimits.anonymous];
        const outcome = await consumeRateLimit(deps.redis, key, limit);
        Object.assign(set.headers, rateLimitHeaders(outcome));
        if (!outcome.allowed) {
          deps.metrics.rateLimited.inc({
            kind: (auth?.ok === true ? kind : "anonymous") satisfies RateLimitKind,
          });
          throw rateLimitError(outcome);
        }
      })

      // The one body reader (src/http/body.ts). A body that cannot be read is recorded, not thrown:
      // the caller's credentials are judged first (the scope guard raises it after authorizing), so
      // a bad token is a 401 whatever the body.
      .onParse({ as: "global" }, async ({ request }) => {
        const state = requestState(request);
        const policy = state?.bodyPolicy;
        if (!state || !policy) return null;
        const type = mediaType(request.headers.get("content-type"));
        try {
          // POST /media reads its multipart body itself, with the same cap (src/media/routes.ts).
          if (policy.kind === "media" && type === "multipart/form-data") return;
          if (type === "multipart/form-data") {
            throw new ApiError(
              "invalid_content_type",
              "multipart/form-data is accepted only by POST /media.",
            );
          }
          const bytes = await readBodyCapped(request, policy);
          state.rawBody = bytes;
          // The webhook authenticates the raw bytes before anything parses them (webhooks/routes.ts).
          if (policy.kind === "webhook") return null;
          state.parsedBody = true;
          return parseBodyBytes(type, bytes);
        } catch (error) {
          // Outside the API (panel, ops) there are no credentials to judge first: refuse at once.
          if (!(error instanceof ApiError) || policy.kind === "form") throw error;
          state.bodyProblem = error;
          return null;
        }
      })

      // The route's body schema, checked here so that a bad body never reaches Elysia's validator,
      // whose error message serializes the whole value (src/http/validation.ts). The problem is
      // recorded like a parse problem; the body the validator then sees is empty and cheap to refuse.
      .onTransform({ as: "global" }, (context) => {
        const state = requestState(context.request);
        if (!state?.parsedBody || state.bodyProblem || context.body == null) return;
        const schema = bodySchemaOf(context.request.method, context.route);
        if (!schema) return;
        const problem = bodyValidationProblem(schema, context.body);
        if (!problem) return;
        state.bodyProblem = problem;
        context.body = null;
      })

      .onError({ as: "global" }, async ({ code, error, request, set, path }) => {
        const state = requestState(request);
        // A send refused before its route settled it: before the answer leaves, so the client's
        // next send already sees the unit back.
        await state?.admittedSend?.refund();
        const requestId = state?.requestId ?? newId("req");
        set.headers["request-id"] = requestId;

        // Elysia wraps what a parse hook throws in a ParseError; ours is the cause.
        const cause = code === "PARSE" ? (error as { cause?: unknown }).cause : undefined;
        let failure: ApiError | OAuthError;
        if (error instanceof ApiError || error instanceof OAuthError) failure = error;
        else if (cause instanceof ApiError) failure = cause;
        else if (code === "VALIDATION" && state?.bodyProblem) failure = state.bodyProblem;
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
          // A summary, capped: an error's message may carry request data of any size.
          deps.logger.error(
            { request_id: requestId, error: loggableError(error), path: capText(path) },
            "unhandled error",
          );
          failure = new ApiError("internal_error", "An internal error occurred. It has been logged.");
        }

        if (pathOf(request.url) === TOKEN_PATH && failure instanceof ApiError)
          failure = toOAuthError(failure);
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
        if (path.startsWith(`${WEBHOOKS_PREFIX}/`) && status >= 400 && status < 500 && status !== 429)
          webhookRejections.record(state.clientIp ?? "local");
        const labels = { method: request.method, route: template, status: String(status) };
        deps.metrics.httpRequests.inc(labels);
        deps.metrics.httpRequestDuration.observe(labels, seconds);
        deps.logger.info(
          {
            request_id: state.requestId,
            method: request.method,
            route: template,
            path: capText(path, 200),
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
  const path = end < 0 ? url.slice(start) : url.slice(start, end);
  // Elysia routes `/x/` to `/x` (strictPath off), so every policy keyed by path (the send
  // admission, the token and media limits, body caps) must see them as one path.
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

/**
 * The client's address. With `trustProxy` = N proxies of ours in front, each appends the address it
 * saw to X-Forwarded-For, so the client is the Nth entry from the right; everything left of it is
 * whatever the client chose to send. A header with fewer than N entries (the request came through
 * fewer proxies than configured) gives its leftmost entry; no header at all, the socket address.
 */
export function clientIpOf(
  request: Request,
  server: { requestIP(request: Request): { address: string } | null } | null,
  trustProxy: number,
): string {
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

/**
 * Route lookups for answers given without a matched route: the methods a path takes (405's Allow),
 * and the template a request would have matched, for requests answered before routing (a 429 or 401
 * from onRequest), so metrics never label a series by a raw path. Patterns are compiled on first use
 * (the routes are known once the app is whole), most specific (fewest parameters) first.
 */
function routeIndex(routes: () => readonly RouteInfo[]) {
  let compiled: { regex: RegExp; method: string; path: string }[] | undefined;
  let bodySchemas: Map<string, TSchema> | undefined;
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
    /** The body schema a route declares (by its template), if it declares one. */
    bodySchemaOf(method: string, template: string): TSchema | undefined {
      bodySchemas ??= new Map(
        routes()
          .map((route) => [`${route.method} ${route.path}`, (route.hooks as { body?: unknown })?.body])
          .filter((entry): entry is [string, TSchema] => typeof entry[1] === "object" && entry[1] !== null),
      );
      return bodySchemas.get(`${method} ${template}`);
    },
  };
}

function errorSummary(error: unknown): string {
  return capText(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
}

/** An error for the log with its stack, both capped (a message may quote request data of any size). */
function loggableError(error: unknown): { type: string; message: string; stack?: string } {
  if (!(error instanceof Error)) return { type: typeof error, message: capText(String(error)) };
  return { type: error.name, message: capText(error.message), stack: capText(error.stack ?? "", 4000) };
}

export function capText(text: string, max = 500): string {
  return text.length > max ? `${text.slice(0, max)}… (${text.length} characters)` : text;
}
