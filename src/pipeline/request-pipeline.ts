import type { TSchema } from "@sinclair/typebox";
import { Elysia } from "elysia";
import {
  bodyPolicy,
  declaredTooLarge,
  mediaType,
  parseBodyBytes,
  readBodyCapped,
  tooLargeError,
} from "../http/body.ts";
import { isDependencyDown } from "../http/dependency-faults.ts";
import { ApiError, apiErrorBody, OAuthError, oauthErrorBody, unknownPathError } from "../http/errors.ts";
import { API_PREFIX, capText, pathOf, routerPathOf } from "../http/paths.ts";
import { consumeRateLimit, rateLimitError, rateLimitHeaders } from "../http/rate-limit.ts";
import { createRejectionTally } from "../http/rejection-tally.ts";
import {
  type RequestState,
  requestState,
  setRequestState,
  type TokenService,
} from "../http/request-state.ts";
import { declaredPolicy, type RouteLimit, type RoutePolicy } from "../http/route-policy.ts";
import { bodyValidationProblem, validationToApiError } from "../http/validation.ts";
import { newId } from "../ids.ts";
import type { Logger } from "../logger.ts";
import { type AdmitSend, admitSendRequest } from "../messages/admission.ts";
import type { Metrics, RateLimitKind } from "../metrics/index.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";

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
   * Per-IP requests per second: callers of the API without a valid token (`anonymous`), the token
   * endpoint (`token`, before the body is read, besides its per-client limit), the panel and the
   * operator endpoints.
   */
  ipLimits: { anonymous: number; token: number; panel: number; ops: number };
  /** The admission of a route whose policy says `send-admission` (src/messages/admission.ts). */
  admitSend: AdmitSend;
  /**
   * Errors of routes whose policy says `errors: "page"` are HTML pages, and so are the 404s of paths
   * under `prefix` that match no route (the panel's).
   */
  pageErrors?: { prefix: string; render(failure: ApiError | OAuthError, requestId: string): Response };
}

interface RouteInfo {
  method: string;
  path: string;
  /** Elysia's route hooks: `body` is the route's schema, `detail` holds its policy. */
  hooks?: unknown;
}

/**
 * The shared HTTP concerns, once for every route: request id, the policy the matched route declared
 * (src/http/route-policy.ts: its limit, spent before the body is read; authentication; its body cap),
 * body parsing, one error renderer, and the access log. Requests that match no route spend the
 * caller's read limit too, so 404s are limited and carry the headers.
 */
export function requestPipeline(deps: PipelineDeps, routes: () => readonly RouteInfo[]) {
  const index = routeIndex(routes);
  const webhookRejections = createRejectionTally({ limit: WEBHOOK_REJECTIONS_PER_MINUTE, windowMs: 60_000 });
  type Headers = { headers: Record<string, unknown> };

  /** One limit spent: the headers set, a refusal counted under `kind` and thrown as a 429. */
  const spend = async (set: Headers, key: string, max: number, kind: RateLimitKind) => {
    const outcome = await consumeRateLimit(deps.redis, key, max);
    Object.assign(set.headers, rateLimitHeaders(outcome));
    if (!outcome.allowed) {
      deps.metrics.rateLimited.inc({ kind });
      throw rateLimitError(outcome);
    }
  };
  const limitIp = (set: Headers, ip: string, kind: "token" | "panel" | "ops") =>
    spend(set, deps.keys.ipRate(ip, kind), deps.ipLimits[kind], kind);

  /** The bearer token, when one is given: recorded in the request state either way. */
  const authenticate = async (request: Request, state: RequestState) => {
    const header = request.headers.get("authorization");
    if (header === null) return undefined;
    state.tokenGiven = true;
    const bearer = /^Bearer +([^\s]+) *$/i.exec(header);
    const check = bearer?.[1]
      ? await deps.tokens.check(bearer[1])
      : ({ ok: false, problem: "malformed" } as const);
    if (!check.ok) {
      state.authProblem = check.problem;
      return undefined;
    }
    state.auth = check.auth;
    return check.auth;
  };

  /** The caller's limit: the application's (send or read), or its IP's without a valid token. */
  const spendCallerLimit = async (
    request: Request,
    set: Headers,
    state: RequestState,
    limit: Extract<RouteLimit, "read" | "send" | "send-admission">,
  ) => {
    const auth = await authenticate(request, state);
    if (auth && limit === "send-admission")
      return admitSendRequest(deps.admitSend, auth, request, state, set);
    if (!auth)
      return spend(
        set,
        deps.keys.ipRate(state.clientIp ?? "local", "read"),
        deps.ipLimits.anonymous,
        "anonymous",
      );
    const kind = limit === "read" ? "read" : "send";
    const max = kind === "send" ? auth.sendLimit : auth.readLimit;
    return spend(set, deps.keys.applicationRate(auth.tenantId, auth.clientId, kind), max, kind);
  };

  /**
   * Applies the policy of the route the router matched, once per request: from the body parser for
   * requests with a body, else from the transform (both run after routing, before the handler).
   * Limits come before anything is read: a refused request is never read, let alone parsed.
   */
  const applyPolicy = async (context: { request: Request; set: Headers; route: string }) => {
    const { request, set } = context;
    const state = requestState(request);
    if (!state || state.policy) return state;
    const policy = index.policyOf(request.method, context.route);
    state.policy = policy;
    state.bodyPolicy = bodyPolicy(policy.body ?? "form");
    const ip = state.clientIp ?? "local";
    if (policy.limit === "webhook-rejections" && webhookRejections.exceeded(ip)) {
      throw new ApiError("rate_limit_exceeded", "Too many rejected webhook requests from this address.", {
        headers: { "retry-after": String(webhookRejections.retryAfterSeconds(ip)) },
      });
    }
    switch (policy.limit) {
      case "none":
      case "webhook-rejections":
        break;
      case "token-ip":
        await limitIp(set, ip, "token");
        break;
      case "panel-ip":
        await limitIp(set, ip, "panel");
        break;
      case "ops-ip":
        await limitIp(set, ip, "ops");
        break;
      default:
        await spendCallerLimit(request, set, state, policy.limit);
    }
    // After the limit: a refused request spends its unit like any other (DESIGN §13), and is never read.
    if (declaredTooLarge(request, state.bodyPolicy)) throw tooLargeError(state.bodyPolicy);
    return state;
  };

  return (
    new Elysia()
      // Requests not yet answered (graceful shutdown waits for them; see src/server.ts).
      .state("inFlight", 0)
      .onRequest(({ request, set, server, store }) => {
        store.inFlight++;
        const state: RequestState = {
          requestId: newId("req"),
          startedAt: performance.now(),
          tokenGiven: false,
        };
        setRequestState(request, state);
        set.headers["request-id"] = state.requestId;
        state.clientIp = clientIpOf(request, server, deps.trustProxy);
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
      })

      // The one body reader (src/http/body.ts), after the route's policy. A body that cannot be read
      // is recorded, not thrown: the caller's credentials are judged first (the scope guard raises
      // it after authorizing), so a bad token is a 401 whatever the body.
      .onParse({ as: "global" }, async (context) => {
        const state = await applyPolicy(context);
        const policy = state?.bodyPolicy;
        if (!state || !policy) return null;
        const { request } = context;
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

      // The route's policy for requests without a body; then the route's body schema, checked here so
      // that a bad body never reaches Elysia's validator, whose error message serializes the whole
      // value (src/http/validation.ts). The problem is recorded like a parse problem; the body the
      // validator then sees is empty and cheap to refuse.
      .onTransform({ as: "global" }, async (context) => {
        const state = await applyPolicy(context);
        if (!state?.parsedBody || state.bodyProblem || context.body == null) return;
        const schema = index.bodySchemaOf(context.request.method, context.route);
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
        else if (code === "NOT_FOUND") failure = await unmatched(request, set, state, path);
        else if (isDependencyDown(error) || isDependencyDown(cause)) {
          deps.logger.warn(
            { request_id: requestId, err: errorSummary(cause ?? error) },
            "dependency unavailable",
          );
          failure = new ApiError(
            "service_unavailable",
            "The service is briefly unavailable. Retry shortly.",
            {
              headers: { "retry-after": "2" },
            },
          );
        } else if (code === "PARSE")
          failure = new ApiError("parameter_invalid", "The request body could not be parsed.");
        else {
          // A summary, capped: an error's message may carry request data of any size.
          deps.logger.error(
            { request_id: requestId, error: loggableError(error), path: capText(path) },
            "unhandled error",
          );
          failure = new ApiError("internal_error", "An internal error occurred. It has been logged.");
        }

        const errors = state?.policy?.errors;
        if (errors === "oauth" && failure instanceof ApiError) failure = toOAuthError(failure);
        if (state) state.status = failure.status;
        const pages = deps.pageErrors;
        if (
          pages &&
          (errors === "page" ||
            (!state?.policy && (path === pages.prefix || path.startsWith(`${pages.prefix}/`))))
        )
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
        const template = route || index.templateOf(request.method, path) || "unmatched";
        if (state.policy?.limit === "webhook-rejections" && status >= 400 && status < 500 && status !== 429)
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

  /**
   * A request no route matched: under the API prefix it spends the caller's read limit like any API
   * call (a 429 or 503 from that wins; outside it there is no caller to charge), then answers 405
   * with Allow when the path takes other methods, else 404.
   */
  async function unmatched(
    request: Request,
    set: Headers,
    state: RequestState | undefined,
    path: string,
  ): Promise<ApiError> {
    if (state && (path === API_PREFIX || path.startsWith(`${API_PREFIX}/`))) {
      try {
        await spendCallerLimit(request, set, state, "read");
      } catch (error) {
        if (error instanceof ApiError) return error;
        throw error;
      }
    }
    const allowed = index.allowedMethods(path);
    return allowed.length > 0 && !allowed.includes(request.method)
      ? new ApiError("method_not_allowed", `${request.method} is not allowed on ${path}.`, {
          headers: { allow: allowed.join(", ") },
        })
      : unknownPathError(request.method, path);
  }
}

/**
 * Every route must declare its policy (src/http/route-policy.ts): called once the app is whole, so a
 * route added without one fails at start-up, never at a request.
 */
export function assertEveryRouteHasPolicy(routes: readonly RouteInfo[]): void {
  const missing = routes.filter((route) => !declaredPolicy(route)).map((r) => `${r.method} ${r.path}`);
  if (missing.length > 0)
    throw new Error(`Routes without a policy (src/http/route-policy.ts): ${missing.join(", ")}`);
}

function toOAuthError(error: ApiError): OAuthError {
  if (error.code === "rate_limit_exceeded")
    return new OAuthError("rate_limit_exceeded", error.message, error.headers);
  // Keep the status: a dependency outage stays a 503 with Retry-After, not a 500.
  if (error.status >= 500) return new OAuthError("server_error", error.message, error.headers, error.status);
  // Keeps 405/413 honest while speaking the token endpoint's error shape.
  return new OAuthError("invalid_request", error.message, error.headers, error.status);
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
 * Route lookups: the policy and body schema of a matched route, and for answers given without one,
 * the methods a path takes (405's Allow) and the template a request would have matched (so metrics
 * never label a series by a raw path). Patterns are compiled on first use
 * (the routes are known once the app is whole), most specific (fewest parameters) first.
 */
function routeIndex(routes: () => readonly RouteInfo[]) {
  let compiled: { regex: RegExp; method: string; path: string }[] | undefined;
  /** What each route declared, by `METHOD template`. */
  let declared: Map<string, { policy?: RoutePolicy; body?: TSchema }> | undefined;
  const declaredBy = (method: string, template: string) => {
    declared ??= new Map(
      routes().map((route) => {
        const body = (route.hooks as { body?: unknown })?.body;
        return [
          `${route.method} ${route.path}`,
          {
            policy: declaredPolicy(route),
            body: typeof body === "object" && body !== null ? (body as TSchema) : undefined,
          },
        ];
      }),
    );
    // HEAD is served by GET routes, and `.all` routes take every method.
    return (
      declared.get(`${method} ${template}`) ??
      (method === "HEAD" ? declared.get(`GET ${template}`) : undefined) ??
      declared.get(`ALL ${template}`)
    );
  };
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
    /**
     * The policy of the route the router matched (`template` is Elysia's `route`). Every route has
     * one (assertEveryRouteHasPolicy); a request that still finds none is a bug, refused rather than
     * let through unlimited.
     */
    policyOf(method: string, template: string): RoutePolicy {
      const policy = declaredBy(method, template)?.policy;
      if (!policy) throw new Error(`${method} ${template} has no policy (src/http/route-policy.ts)`);
      return policy;
    },
    /** The body schema the matched route declares, if it declares one. */
    bodySchemaOf: (method: string, template: string): TSchema | undefined =>
      declaredBy(method, template)?.body,
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
