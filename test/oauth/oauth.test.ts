import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as oidc from "openid-client";
import { revokeApplication } from "../../src/applications/service.ts";
import {
  appWithLimits,
  call,
  createTenantWithApp,
  createTestEnv,
  getToken,
  type TestEnv,
} from "../support/index.ts";

let env: TestEnv;
let creds: { clientId: string; clientSecret: string; tenant: { id: string } };

beforeAll(async () => {
  // Most tests make many token calls; the real 2/s limit is tested on an app that keeps it.
  env = await createTestEnv({ limits: { token: 1000, anonymous: 1000 } });
  creds = await createTenantWithApp(env.deps);
});
afterAll(() => env.close());

const TOKEN = "/v2/oauth/token";
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`;

/** The client-credentials grant of an application (the file's own unless given), as a body carries it. */
const grant = (app: { clientId: string; clientSecret: string } = creds) => ({
  grant_type: "client_credentials",
  client_id: app.clientId,
  client_secret: app.clientSecret,
});

function tokenCall(options: Parameters<typeof call>[3]) {
  return call(env.app, "POST", TOKEN, options);
}

function expectOAuthError(result: Awaited<ReturnType<typeof call>>, status: number, error: string) {
  expect(result.status).toBe(status);
  expect(result.body).toEqual({
    error,
    error_description: expect.any(String),
    request_id: result.headers.get("request-id"),
  });
  expect(result.headers.get("request-id")).toMatch(/^req_[0-9A-Za-z]{22}$/);
  expect(result.headers.get("cache-control")).toBe("no-store");
}

describe("POST /oauth/token", () => {
  test("JSON body issues a Bearer token for an hour with the application's scopes (all, by default)", async () => {
    const result = await tokenCall({ body: grant() });
    expect(result.status).toBe(200);
    expect(result.body).toEqual({
      access_token: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/),
      token_type: "Bearer",
      expires_in: 3600,
      // An application created without a choice of scopes has every one, webhooks:manage included.
      scope: "messaging:send messaging:read webhooks:manage",
    });
    expect(result.headers.get("cache-control")).toBe("no-store");
    expect(result.headers.get("ratelimit-limit")).toBe("1000");
    expect(result.headers.get("x-ratelimit-limit")).toBe("1000");
  });

  test("form body (RFC 6749) works", async () => {
    const result = await tokenCall({
      rawBody: new URLSearchParams(grant()).toString(),
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(result.status).toBe(200);
    expect(result.body.token_type).toBe("Bearer");
  });

  test("HTTP Basic credentials work with a form or JSON grant_type", async () => {
    const form = await tokenCall({
      rawBody: "grant_type=client_credentials",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: basic(creds.clientId, creds.clientSecret),
      },
    });
    expect(form.status).toBe(200);
    const json = await tokenCall({
      body: { grant_type: "client_credentials" },
      headers: { authorization: basic(creds.clientId, creds.clientSecret) },
    });
    expect(json.status).toBe(200);
  });

  test("the token names the tenant and the client", async () => {
    const token = await getToken(env.app, creds.clientId, creds.clientSecret);
    const checked = await env.deps.tokens.check(token);
    expect(checked.ok).toBe(true);
    if (checked.ok) {
      expect(checked.auth.tenantId).toBe(creds.tenant.id);
      expect(checked.auth.clientId).toBe(creds.clientId);
    }
  });

  test("scope: a subset narrows the token; outside the application's scopes is invalid_scope", async () => {
    const narrowed = await tokenCall({ body: { ...grant(), scope: "messaging:read" } });
    expect(narrowed.status).toBe(200);
    expect(narrowed.body.scope).toBe("messaging:read");

    const readOnly = await createTenantWithApp(env.deps, { scopes: ["messaging:read"] });
    const widened = await tokenCall({ body: { ...grant(readOnly), scope: "messaging:read messaging:send" } });
    expectOAuthError(widened, 400, "invalid_scope");
    const managing = await tokenCall({ body: { ...grant(readOnly), scope: "webhooks:manage" } });
    expectOAuthError(managing, 400, "invalid_scope");
    const onlyManaging = await tokenCall({ body: { ...grant(), scope: "webhooks:manage" } });
    expect(onlyManaging.body.scope).toBe("webhooks:manage");
    const unknown = await tokenCall({ body: { ...grant(), scope: "admin" } });
    expectOAuthError(unknown, 400, "invalid_scope");
  });

  test("every OAuth error has the RFC 6749 shape", async () => {
    const good = grant();
    expectOAuthError(
      await tokenCall({ body: { ...good, grant_type: "password" } }),
      400,
      "unsupported_grant_type",
    );
    expectOAuthError(
      await tokenCall({ body: { client_id: creds.clientId, client_secret: creds.clientSecret } }),
      400,
      "invalid_request",
    );
    expectOAuthError(
      await tokenCall({ rawBody: "{not json", headers: { "content-type": "application/json" } }),
      400,
      "invalid_request",
    );
    expectOAuthError(
      await tokenCall({
        rawBody: `grant_type=client_credentials&client_id=${creds.clientId}&client_id=${creds.clientId}&client_secret=x`,
        headers: { "content-type": "application/x-www-form-urlencoded" },
      }),
      400,
      "invalid_request",
    );
    expectOAuthError(
      await tokenCall({ body: good, headers: { authorization: basic(creds.clientId, creds.clientSecret) } }),
      400,
      "invalid_request",
    );
    expectOAuthError(
      await tokenCall({
        rawBody: "grant_type=client_credentials",
        headers: { "content-type": "text/plain" },
      }),
      400,
      "invalid_request",
    );
    const wrongSecret = await tokenCall({ body: { ...good, client_secret: `${creds.clientSecret}x` } });
    expectOAuthError(wrongSecret, 401, "invalid_client");
    expect(wrongSecret.headers.get("www-authenticate")).toContain("Basic");
    expectOAuthError(await tokenCall({ body: { ...good, client_id: "cid_unknown" } }), 401, "invalid_client");
    expectOAuthError(await tokenCall({ body: { grant_type: "client_credentials" } }), 401, "invalid_client");
    expectOAuthError(await tokenCall({ body: { ...good, client_id: 42 } }), 400, "invalid_request");
  });

  test("client ids are case-sensitive: a flipped-case id is an unknown client", async () => {
    const flipped = creds.clientId.replace(/[a-z]/, (c) => c.toUpperCase());
    expect(flipped).not.toBe(creds.clientId);
    const result = await tokenCall({ body: grant({ clientId: flipped, clientSecret: creds.clientSecret }) });
    expectOAuthError(result, 401, "invalid_client");
  });

  test("429 with Retry-After once 2 requests were made in one second, per client_id", async () => {
    const strict = await appWithLimits(env, { anonymous: 5, token: 2 });
    const body = grant();
    const results = [];
    for (let i = 0; i < 3; i++) results.push(await call(strict, "POST", TOKEN, { body }));
    expect(results.map((r) => r.status)).toEqual([200, 200, 429]);
    const limited = results[2]!;
    expectOAuthError(limited, 429, "rate_limit_exceeded");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get("ratelimit-remaining")).toBe("0");
    // Another client is not affected.
    const other = await createTenantWithApp(env.deps);
    const otherResult = await call(strict, "POST", TOKEN, { body: grant(other) });
    expect(otherResult.status).toBe(200);
  });

  test("a second token leaves the first valid; tokens expire after 3600 s by the clock", async () => {
    const first = await getToken(env.app, creds.clientId, creds.clientSecret);
    env.clock.advance(1800);
    const second = await getToken(env.app, creds.clientId, creds.clientSecret);
    expect(second).not.toBe(first);
    expect((await env.deps.tokens.check(first)).ok).toBe(true);
    expect((await env.deps.tokens.check(second)).ok).toBe(true);
    env.clock.advance(1801);
    expect(await env.deps.tokens.check(first)).toEqual({ ok: false, problem: "expired" });
    expect((await env.deps.tokens.check(second)).ok).toBe(true);
    env.clock.advance(1800);
    expect(await env.deps.tokens.check(second)).toEqual({ ok: false, problem: "expired" });
    env.clock.set(new Date());
  });

  test("a revoked application gets invalid_client, but its issued tokens work until they expire", async () => {
    const app = await createTenantWithApp(env.deps);
    const issued = await getToken(env.app, app.clientId, app.clientSecret);
    await revokeApplication(env.deps.db, app.clientId, env.clock);
    const refused = await tokenCall({ body: grant(app) });
    expectOAuthError(refused, 401, "invalid_client");
    expect((await env.deps.tokens.check(issued)).ok).toBe(true);
  });

  test("the secret is stored only as a digest", async () => {
    const rows = await env.deps.db.selectFrom("applications").selectAll().execute();
    for (const row of rows) {
      expect(JSON.stringify(row)).not.toContain(creds.clientSecret);
      expect(row.secret_digest.length).toBe(32);
    }
  });
});

describe("OAuth 2.0 Authorization Server Metadata (RFC 8414)", () => {
  const issuer = () => env.config.publicBaseUrl;

  test("is served at the well-known path of the issuer {base_url}", async () => {
    const result = await call(env.app, "GET", "/.well-known/oauth-authorization-server/v2");
    expect(result.status).toBe(200);
    expect(result.body).toEqual({
      issuer: issuer(),
      token_endpoint: `${issuer()}/oauth/token`,
      grant_types_supported: ["client_credentials"],
      token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
      scopes_supported: ["messaging:send", "messaging:read", "webhooks:manage"],
      response_types_supported: [],
      service_documentation: `${issuer()}/reference`,
    });
    expect(result.headers.get("request-id")).toMatch(/^req_/);
  });

  test("openid-client discovers the token endpoint and gets a token with either auth method", async () => {
    // The requests go through the real app; the issuer is the configured base URL (http://localhost/v2).
    let tokenRequest: Request | undefined;
    const throughApp: oidc.CustomFetch = async (url, init) => {
      const request = new Request(url, init as RequestInit);
      if (request.method === "POST") tokenRequest = request.clone();
      return env.app.handle(request);
    };
    for (const [method, auth] of [
      ["client_secret_basic", oidc.ClientSecretBasic(creds.clientSecret)],
      ["client_secret_post", oidc.ClientSecretPost(creds.clientSecret)],
    ] as const) {
      const config = await oidc.discovery(new URL(issuer()), creds.clientId, undefined, auth, {
        algorithm: "oauth2",
        execute: [oidc.allowInsecureRequests],
        [oidc.customFetch]: throughApp,
      });
      config[oidc.customFetch] = throughApp;
      expect(config.serverMetadata().token_endpoint).toBe(`${issuer()}/oauth/token`);
      const token = await oidc.clientCredentialsGrant(config, { scope: "messaging:read" });
      expect({ method, type: token.token_type.toLowerCase(), scope: token.scope }).toEqual({
        method,
        type: "bearer",
        scope: "messaging:read",
      });
      // Each method really was used: HTTP Basic, or the secret in the form body.
      const sent = tokenRequest as Request;
      const form = new URLSearchParams(await sent.text());
      expect(sent.headers.get("authorization")?.startsWith("Basic ") ?? false).toBe(
        method === "client_secret_basic",
      );
      expect(form.get("client_secret")).toBe(method === "client_secret_post" ? creds.clientSecret : null);
      const senders = await call(env.app, "GET", "/v2/senders", { token: token.access_token });
      expect(senders.status).toBe(200);
    }
  });
});
