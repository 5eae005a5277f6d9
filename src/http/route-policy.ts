import { Elysia } from "elysia";
import type { BodyKind } from "./body.ts";

/**
 * What a route needs from the request pipeline, declared where the route is defined:
 *
 *     .post("/messages", handler, { policy: { limit: "send-admission", body: "api" }, scope: "messaging:send" })
 *
 * The pipeline (src/pipeline/request-pipeline.ts) applies the policy of the route the router matched,
 * after routing and before the body is read; it never reads a path to decide one. A route without a
 * policy is refused when the app is built (src/app.ts), so no route can be forgotten.
 */

/** Which limit a request spends, before its body is read. */
export type RouteLimit =
  /** The application's read limit (the bearer token's), or its IP's anonymous limit without a valid token. */
  | "read"
  /** The application's send limit; without a valid token, the IP's anonymous limit. */
  | "send"
  /** POST /messages: the send limit, a unit of the daily quota and the Idempotency-Key in one Redis call. */
  | "send-admission"
  /** Per-IP limits of the token endpoint (before its body: the client is in it), the panel, ops. */
  | "token-ip"
  | "panel-ip"
  | "ops-ip"
  /** A webhook caller that keeps failing the signature check is refused for the rest of the minute. */
  | "webhook-rejections"
  /** Static files and health checks: nothing spent. */
  | "none";

export interface RoutePolicy {
  limit: RouteLimit;
  /** The body's cap and reading (src/http/body.ts); `form` (64 KB) when not said. */
  body?: BodyKind;
  /** How its errors are rendered: SPEC's envelope, RFC 6749's shape, or an HTML page. `api` when not said. */
  errors?: "api" | "oauth" | "page";
}

/** Where the policy is kept on the route (its `detail`; src/docs/openapi.ts leaves it out). */
export const POLICY_DETAIL_KEY = "x-route-policy";

/** `{ policy: {...} }` on a route, or on a `guard` around a group of routes. */
export const routePolicy = new Elysia({ name: "route-policy" }).macro({
  policy: (policy: RoutePolicy) => ({
    detail: { [POLICY_DETAIL_KEY]: policy } as Record<string, unknown>,
  }),
});

/** The policy a route declared. */
export function declaredPolicy(route: { hooks?: unknown }): RoutePolicy | undefined {
  const detail = (route.hooks as { detail?: Record<string, unknown> } | undefined)?.detail;
  return detail?.[POLICY_DETAIL_KEY] as RoutePolicy | undefined;
}

/** The policies most routes take. */
export const POLICIES = {
  apiRead: { limit: "read", body: "api" },
  apiSend: { limit: "send", body: "api" },
  public: { limit: "none" },
} as const satisfies Record<string, RoutePolicy>;
