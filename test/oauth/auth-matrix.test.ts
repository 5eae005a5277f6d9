import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../../src/clock.ts";
import { ALL_SCOPES, type Scope } from "../../src/http/request-state.ts";
import { routeScope } from "../../src/http/scope.ts";
import { createTokenService } from "../../src/oauth/tokens.ts";
import { call, createTenantWithApp, createTestEnv, getToken, type TestEnv } from "../support/index.ts";

let env: TestEnv;
let tokens: { read: string; send: string; manage: string; expired: string; forged: string };

beforeAll(async () => {
  env = await createTestEnv({ limits: { anonymous: 100_000, token: 100_000 } });
  const creds = await createTenantWithApp(env.deps);
  const auth = {
    clientId: creds.clientId,
    tenantId: creds.tenant.id,
    scopes: ["messaging:read", "messaging:send", "webhooks:manage"] as const,
    readLimit: 100_000,
    sendLimit: 100_000,
  };
  const past = new ManualClock(new Date(Date.now() - 2 * 3600 * 1000));
  tokens = {
    read: await getToken(env.app, creds.clientId, creds.clientSecret, "messaging:read"),
    send: await getToken(env.app, creds.clientId, creds.clientSecret, "messaging:send"),
    manage: await getToken(env.app, creds.clientId, creds.clientSecret, "webhooks:manage"),
    // Genuine but issued two hours ago.
    expired: (
      await createTokenService(env.config.jwtSecret, past).issue({ ...auth, scopes: [...auth.scopes] })
    ).token,
    // Well-formed, but signed with a key that is not ours.
    forged: (
      await createTokenService("another-key-".repeat(4), env.clock).issue({
        ...auth,
        scopes: [...auth.scopes],
      })
    ).token,
  };
});
afterAll(() => env.close());

function protectedRoutes() {
  return env.app.routes
    .map((route) => ({ method: route.method, path: route.path, scope: routeScope(route) }))
    .filter(
      (route): route is { method: string; path: string; scope: NonNullable<typeof route.scope> } =>
        !!route.scope,
    );
}

const concrete = (path: string) => path.replace(/:[^/]+/g, "x_placeholder");

/** A token of exactly this scope. */
const tokenOf = (scope: Scope) =>
  ({ "messaging:read": tokens.read, "messaging:send": tokens.send, "webhooks:manage": tokens.manage })[scope];
/**
 * A token lacking the scope: for the webhook endpoints' management, the one that reads (a read-only
 * credential must neither see a secret nor repoint the event stream).
 */
const tokenWithout = (scope: Scope) => (scope === "messaging:read" ? tokens.send : tokens.read);

describe("auth matrix over every protected /v2 route", () => {
  test("the app has protected routes under /v2, each with one of the scopes", () => {
    const routes = protectedRoutes();
    expect(routes.length).toBeGreaterThanOrEqual(4);
    for (const route of routes) {
      expect(route.path.startsWith("/v2/")).toBe(true);
      expect(ALL_SCOPES).toContain(route.scope);
    }
    expect(routes.map((r) => `${r.method} ${r.path}`)).toEqual(
      expect.arrayContaining(["POST /v2/messages", "POST /v2/media", "GET /v2/senders"]),
    );
  });

  test("managing webhook endpoints takes webhooks:manage; reading them, messaging:read", () => {
    const ofEndpoints = protectedRoutes()
      .filter((route) => route.path.startsWith("/v2/webhook_endpoints"))
      .map((route) => `${route.scope} ${route.method} ${route.path}`)
      .sort();
    expect(ofEndpoints).toEqual([
      "messaging:read GET /v2/webhook_endpoints",
      "messaging:read GET /v2/webhook_endpoints/:endpoint_id",
      "webhooks:manage DELETE /v2/webhook_endpoints/:endpoint_id",
      "webhooks:manage PATCH /v2/webhook_endpoints/:endpoint_id",
      "webhooks:manage POST /v2/webhook_endpoints",
      "webhooks:manage POST /v2/webhook_endpoints/:endpoint_id/replay",
      "webhooks:manage POST /v2/webhook_endpoints/:endpoint_id/rotate_secret",
    ]);
  });

  test("no token, malformed, expired, foreign-signed: 401 with WWW-Authenticate; wrong scope: 403", async () => {
    for (const route of protectedRoutes()) {
      const path = concrete(route.path);
      const body = route.method === "GET" ? undefined : {};
      const cases: [string, Record<string, string>, string | null][] = [
        ["none", {}, 'Bearer realm="messaging"'],
        ["malformed", { authorization: "Bearer not-a-jwt" }, "invalid_token"],
        ["wrong scheme", { authorization: `Basic ${btoa("a:b")}` }, "invalid_token"],
        ["expired", { authorization: `Bearer ${tokens.expired}` }, "invalid_token"],
        ["foreign", { authorization: `Bearer ${tokens.forged}` }, "invalid_token"],
      ];
      for (const [name, headers, challenge] of cases) {
        const result = await call(env.app, route.method, path, { headers, body });
        const label = `${route.method} ${route.path} (${name})`;
        expect({ label, status: result.status }).toEqual({ label, status: 401 });
        expect(result.body.error).toMatchObject({
          type: "authentication_error",
          code: "unauthorized",
          param: null,
        });
        expect(result.body.error.request_id).toBe(result.headers.get("request-id"));
        expect(result.headers.get("www-authenticate")).toContain(challenge ?? "");
        expect(result.headers.get("ratelimit-limit")).not.toBeNull();
      }
      const expired = await call(env.app, route.method, path, {
        headers: { authorization: `Bearer ${tokens.expired}` },
        body,
      });
      expect(expired.body.error.message).toContain("expired");

      const forbidden = await call(env.app, route.method, path, { token: tokenWithout(route.scope), body });
      expect({ route: route.path, status: forbidden.status }).toEqual({ route: route.path, status: 403 });
      expect(forbidden.body.error).toMatchObject({ type: "permission_error", code: "insufficient_scope" });
      expect(forbidden.headers.get("www-authenticate")).toBe(
        `Bearer realm="messaging", error="insufficient_scope", scope="${route.scope}"`,
      );

      const passed = await call(env.app, route.method, path, { token: tokenOf(route.scope), body });
      expect({ route: route.path, status: passed.status }).not.toEqual({ route: route.path, status: 401 });
      expect(passed.status).not.toBe(403);
      expect(passed.status).toBeLessThan(500);
    }
  });

  test("every route is in the OpenAPI document", async () => {
    const spec = await call(env.app, "GET", "/v2/openapi.json");
    for (const route of protectedRoutes()) {
      // Documented relative to {base_url}, which ends in /v2.
      const openapiPath = route.path.replace(/^\/v2/, "").replace(/:([^/]+)/g, "{$1}");
      expect(spec.body.paths[openapiPath]?.[route.method.toLowerCase()]).toBeDefined();
    }
  });
});
