import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { DEPENDENCY_RETRY_AFTER_SECONDS } from "../../src/http/dependency-faults.ts";
import { API_ERRORS } from "../../src/http/errors.ts";
import { createRedis } from "../../src/redis/connect.ts";
import {
  appWithLimits,
  call,
  createTenantWithApp,
  createTestEnv,
  expectApiError,
  getToken,
  nextSecond,
  type TestEnv,
} from "../support/index.ts";

let env: TestEnv;
let token: string;

beforeAll(async () => {
  env = await createTestEnv({ limits: { token: 1000, anonymous: 1000 } });
  const creds = await createTenantWithApp(env.deps, { readLimit: 5, sendLimit: 3 });
  token = await getToken(env.app, creds.clientId, creds.clientSecret);
});
afterAll(() => env.close());

const REQUEST_ID = /^req_[0-9A-Za-z]{22}$/;

function rateHeaders(result: Awaited<ReturnType<typeof call>>) {
  const h = (name: string) => result.headers.get(name);
  return {
    policy: h("ratelimit-policy"),
    limit: h("ratelimit-limit"),
    remaining: h("ratelimit-remaining"),
    reset: h("ratelimit-reset"),
    xLimit: h("x-ratelimit-limit"),
    xRemaining: h("x-ratelimit-remaining"),
    xReset: h("x-ratelimit-reset"),
  };
}

function expectConsistentRateHeaders(result: Awaited<ReturnType<typeof call>>, limit: number) {
  const r = rateHeaders(result);
  expect(r.limit).toBe(String(limit));
  expect(r.policy).toBe(`${limit};w=1`);
  expect(r.xLimit).toBe(r.limit);
  expect(r.xRemaining).toBe(r.remaining);
  expect(Number(r.reset)).toBe(1);
  const nowEpoch = Math.floor(Date.now() / 1000);
  expect(Number(r.xReset)).toBeGreaterThanOrEqual(nowEpoch);
  expect(Number(r.xReset)).toBeLessThanOrEqual(nowEpoch + 2);
}

describe("request pipeline", () => {
  test("Request-Id on success, unique per request", async () => {
    const a = await call(env.app, "GET", "/v2/docs");
    const b = await call(env.app, "GET", "/healthz");
    expect(a.status).toBe(200);
    expect(a.headers.get("request-id")).toMatch(REQUEST_ID);
    expect(b.headers.get("request-id")).toMatch(REQUEST_ID);
    expect(a.headers.get("request-id")).not.toBe(b.headers.get("request-id"));
  });

  test("unknown path: 404 resource_missing envelope with rate-limit headers", async () => {
    const result = await call(env.app, "GET", "/v2/no-such-thing", { token });
    expectApiError(result, 404, "resource_missing", null);
    expectConsistentRateHeaders(result, 5);
  });

  test("known path, wrong method: 405 with Allow", async () => {
    const result = await call(env.app, "DELETE", "/v2/docs", { token });
    expectApiError(result, 405, "method_not_allowed", null);
    expect(result.headers.get("allow")).toBe("GET");
  });

  test("unauthenticated requests are limited per IP and carry both header families", async () => {
    const strict = await appWithLimits(env, { anonymous: 5, token: 2 });
    const results = [];
    for (let i = 0; i < 6; i++) results.push(await call(strict, "GET", "/v2/nope"));
    expect(results.map((r) => r.status)).toEqual([404, 404, 404, 404, 404, 429]);
    expect(results.map((r) => r.headers.get("ratelimit-remaining"))).toEqual(["4", "3", "2", "1", "0", "0"]);
    for (const r of results) expectConsistentRateHeaders(r, 5);
    expectApiError(results[5]!, 429, "rate_limit_exceeded", null);
    expect(results[5]!.headers.get("retry-after")).toBe("1");
  });

  test("429 after the application's limit inside one second, and recovery in the next", async () => {
    await nextSecond();
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await call(env.app, "GET", "/v2/nope", { token })).status);
    expect(statuses).toEqual([404, 404, 404, 404, 404, 429]);
    await nextSecond();
    const recovered = await call(env.app, "GET", "/v2/nope", { token });
    expect(recovered.status).toBe(404);
    expect(recovered.headers.get("ratelimit-remaining")).toBe("4");
  });

  test("two app instances sharing one Redis share one limit", async () => {
    const second = createApp(env.deps);
    await nextSecond();
    const statuses = [];
    for (let i = 0; i < 6; i++) {
      statuses.push((await call(i % 2 === 0 ? env.app : second, "GET", "/v2/nope", { token })).status);
    }
    expect(statuses).toEqual([404, 404, 404, 404, 404, 429]);
  });

  test("a huge body is refused with 413 before it is read", async () => {
    await nextSecond();
    const result = await call(env.app, "POST", "/v2/oauth/token", {
      rawBody: "x".repeat(2 * 1024 * 1024),
      headers: { "content-type": "application/json" },
    });
    expect(result.status).toBe(413);
    expect(result.body.error).toBe("invalid_request");
  });

  test("very long header values do not break the pipeline", async () => {
    await nextSecond();
    const result = await call(env.app, "GET", "/v2/nope", {
      headers: { authorization: `Bearer ${"a".repeat(20_000)}` },
    });
    expectApiError(result, 404, "resource_missing", null);
    const noisy = await call(env.app, "GET", "/v2/docs", {
      headers: { "x-custom": "ü".repeat(1).normalize() && "x".repeat(30_000) },
    });
    expect(noisy.status).toBe(200);
  });

  test("/docs has an anchor for every error code; openapi.json is served", async () => {
    await nextSecond();
    const docs = await call(env.app, "GET", "/v2/docs");
    expect(docs.headers.get("content-type")).toContain("text/html");
    for (const code of Object.keys(API_ERRORS)) expect(docs.text).toContain(`id="${code}"`);
    for (const code of [
      "invalid_request",
      "invalid_client",
      "unsupported_grant_type",
      "invalid_scope",
      "server_error",
    ]) {
      expect(docs.text).toContain(`id="oauth-${code}"`);
    }
    const spec = await call(env.app, "GET", "/v2/openapi.json");
    expect(spec.status).toBe(200);
    // Paths are relative to {base_url} (servers[0]), which ends in /v2; test/docs/openapi.test.ts covers the rest.
    expect(spec.body.paths["/oauth/token"].post).toBeDefined();
  });

  test("Redis unreachable: 503 with Retry-After (envelope, and OAuth shape on the token endpoint); /readyz fails", async () => {
    const deadRedis = createRedis("redis://127.0.0.1:1");
    try {
      const broken = createApp({ ...env.deps, redis: deadRedis });
      const api = await call(broken, "GET", "/v2/senders", { token });
      expectApiError(api, 503, "service_unavailable", null);
      // One answer to a dependency fault, whichever dependency and path: a restart takes seconds.
      expect(api.headers.get("retry-after")).toBe(String(DEPENDENCY_RETRY_AFTER_SECONDS));
      const oauth = await call(broken, "POST", "/v2/oauth/token", {
        body: { grant_type: "client_credentials", client_id: "cid_x", client_secret: "y" },
      });
      expect(oauth.status).toBe(503);
      expect(oauth.body.error).toBe("server_error");
      expect(oauth.headers.get("retry-after")).toBe(String(DEPENDENCY_RETRY_AFTER_SECONDS));
      const ready = await call(broken, "GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({ status: "unavailable", postgres: "ok", redis: "unavailable" });
    } finally {
      deadRedis.disconnect();
    }
  });

  test("/healthz and /readyz", async () => {
    expect((await call(env.app, "GET", "/healthz")).body).toEqual({ status: "ok" });
    expect((await call(env.app, "GET", "/readyz")).body).toEqual({
      status: "ready",
      postgres: "ok",
      redis: "ok",
    });
  });
});
