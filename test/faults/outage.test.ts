import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, createApp } from "../../src/app.ts";
import { createDb, type Db } from "../../src/db/connect.ts";
import { createRedis, type RedisClient } from "../../src/redis/connect.ts";
import { createShop, postMessage, type Shop } from "../support/fixtures.ts";
import {
  call,
  createTestEnv,
  eventually,
  expectUnavailable,
  requestToken,
  type TestEnv,
} from "../support/index.ts";
import { createPanelUserWithTenant, PanelClient } from "../support/panel.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts";

/**
 * Postgres or Redis going away and coming back (issue 7): answers are 503 envelopes with
 * Retry-After, promptly (not hangs, not 500s); /readyz fails; the same app instance recovers by
 * itself. The dependencies sit behind TCP proxies the test cuts, so the shared servers stay up.
 */
let env: TestEnv;
let pgProxy: TcpProxy;
let redisProxy: TcpProxy;
let db: Db;
let redis: RedisClient;
let app: App;
let tenant: Shop;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  tenant = await createShop(env, "Outage Shop", { templates: true });
  pgProxy = await startTcpProxy({ host: "127.0.0.1", port: 5432 });
  redisProxy = await startTcpProxy({ host: "127.0.0.1", port: 6379 });
  const pgUrl = new URL(env.config.databaseUrl);
  pgUrl.port = String(pgProxy.port);
  db = createDb(pgUrl.toString(), { connectionTimeoutMillis: 1000 });
  redis = createRedis(`redis://127.0.0.1:${redisProxy.port}/0`);
  app = createApp({ ...env.deps, db, redis });
});
afterAll(async () => {
  await db.destroy();
  redis.disconnect();
  await pgProxy.close();
  await redisProxy.close();
  await env.close();
});

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

const send = () =>
  postMessage(app, tenant.token, {
    to: "+4915100000001",
    template: { name: "order_shipped", language: "en", variables: { body: ["A", "1"] } },
  });
const conversations = () => call(app, "GET", "/v2/conversations", { token: tenant.token });

/** While a dependency is cut: a read and a send are 503 envelopes, the read promptly (not a hang). */
async function expectReadAndSendUnavailable() {
  const read = await timed(conversations);
  expectUnavailable(read.value);
  expect(read.ms).toBeLessThan(10_000);
  expectUnavailable(await send());
}

/** Once it is back: the same instance reads and accepts a send again. */
async function expectServing() {
  expect((await conversations()).status).toBe(200);
  const accepted = await send();
  expect(accepted.text).toContain('"status":"accepted"');
  expect(accepted.status).toBe(201);
}

describe("Postgres unreachable", () => {
  test("503 envelopes with Retry-After, /readyz fails, and the same instance recovers", async () => {
    expect((await conversations()).status).toBe(200);
    const panel = await createPanelUserWithTenant(env.deps);

    pgProxy.cut();
    try {
      await expectReadAndSendUnavailable();
      const token = await requestToken(app, tenant.clientId, tenant.clientSecret);
      expect(token.status).toBe(503);
      expect(token.body.error).toBe("server_error");
      expect(token.headers.get("retry-after")).not.toBeNull();
      const ready = await call(app, "GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({ status: "unavailable", postgres: "unavailable", redis: "ok" });
      // The panel answers with a page, not a JSON envelope.
      const signIn = new PanelClient(app);
      await signIn.get("/panel/sign-in");
      const page = await signIn.post("/panel/sign-in", { email: panel.email, password: panel.password });
      expect(page.status).toBe(503);
      expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(page.text).toContain("Briefly unavailable");
    } finally {
      pgProxy.restore();
    }

    // No restart: the pool opens new connections once Postgres answers again.
    await eventually(async () => (await call(app, "GET", "/readyz")).status === 200);
    await expectServing();
  });
});

describe("Redis unreachable", () => {
  test("503 envelopes with Retry-After, /readyz fails, and the same instance recovers", async () => {
    expect((await conversations()).status).toBe(200);

    redisProxy.cut();
    try {
      await expectReadAndSendUnavailable();
      const ready = await call(app, "GET", "/readyz");
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({ status: "unavailable", postgres: "ok", redis: "unavailable" });
    } finally {
      redisProxy.restore();
    }

    // ioredis reconnects by itself (its retry strategy backs off up to 2 s).
    await eventually(async () => (await call(app, "GET", "/readyz")).status === 200, 15_000);
    await expectServing();
  });
});
