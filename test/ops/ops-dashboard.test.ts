import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { call, createTestEnv, type TestEnv, workJob } from "../support/index.ts";

/** The operator endpoints' guard (src/ops/guard.ts) and the bull-board dashboard at /ops/queues. */

const OPS_USER = "operator";
const OPS_PASSWORD = "correct horse battery staple";
const basic = (user: string, password: string) => ({
  authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`,
});
const RIGHT = basic(OPS_USER, OPS_PASSWORD);

let env: TestEnv;
beforeAll(async () => {
  // The retry below needs a writable board; wrong credentials come from several addresses (one
  // address is throttled after 10 failures: test/hostile/hostile-limits.test.ts).
  env = await createTestEnv({ env: { OPS_USER, OPS_PASSWORD, OPS_QUEUES_WRITE: "1", TRUST_PROXY: "1" } });
});
afterAll(() => env.close());

const OPS_PATHS = ["/metrics", "/ops/queues", "/ops/queues/api/queues", "/ops/queues/static/favicon.ico"];

describe("with OPS_USER and OPS_PASSWORD set", () => {
  test.each(OPS_PATHS)(
    "%s refuses missing and wrong credentials with 401 and a Basic challenge",
    async (path) => {
      const attempts: Record<string, string>[] = [
        {},
        basic(OPS_USER, "wrong"),
        basic("someone", OPS_PASSWORD),
        basic(OPS_USER, `${OPS_PASSWORD}x`),
        basic("", ""),
        { authorization: `Basic ${Buffer.from(OPS_USER).toString("base64")}` }, // no colon
        { authorization: "Bearer abc" },
        { authorization: "Basic !!!" },
      ];
      for (const [i, headers] of attempts.entries()) {
        const result = await call(env.app, "GET", path, {
          headers: { ...headers, "x-forwarded-for": `192.0.2.${i + 1}` },
        });
        expect({ headers, status: result.status }).toEqual({ headers, status: 401 });
        expect(result.headers.get("www-authenticate")).toBe('Basic realm="ops"');
        expect(result.body.error.code).toBe("unauthorized");
      }
    },
  );

  test("the right credentials open /metrics", async () => {
    const result = await call(env.app, "GET", "/metrics", { headers: RIGHT });
    expect(result.status).toBe(200);
    expect(result.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
    expect(result.text).toContain("# TYPE http_requests_total counter");
  });

  test("the dashboard page renders, and every asset it names is served here (no CDN)", async () => {
    const page = await call(env.app, "GET", "/ops/queues", { headers: RIGHT });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toStartWith("text/html");
    expect(page.text).toContain('<base href="/ops/queues/"');
    expect(page.text).toContain('<div id="root">');
    expect(page.text).not.toContain("googleapis");

    const assets = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    const local = assets.filter((a) => a.startsWith("static/"));
    expect(local.some((a) => a.endsWith(".js"))).toBe(true);
    expect(local.some((a) => a.endsWith(".css"))).toBe(true);
    // Nothing from elsewhere: every URL is relative to the base, the base itself, or the service's
    // own icon (issue 24), which is public like on every other page.
    const icons = ["/favicon.ico", "/favicon.svg"];
    expect(
      assets.filter((a) => !a.startsWith("static/") && a !== "/ops/queues/" && !icons.includes(a)),
    ).toEqual([]);
    expect(assets.filter((a) => icons.includes(a)).sort()).toEqual(icons);
    for (const icon of icons) expect((await call(env.app, "GET", icon)).status).toBe(200);
    for (const asset of local) {
      const path = `/ops/queues/${asset}`;
      const served = await env.app.handle(new Request(`http://localhost${path}`, { headers: RIGHT }));
      expect({ path, status: served.status }).toEqual({ path, status: 200 });
      expect((await served.arrayBuffer()).byteLength).toBeGreaterThan(0);
      if (asset.endsWith(".js")) expect(served.headers.get("content-type")).toContain("javascript");
      if (asset.endsWith(".css")) expect(served.headers.get("content-type")).toContain("text/css");
      // Assets are behind the guard too.
      expect((await call(env.app, "GET", path)).status).toBe(401);
    }
    // A path the board does not know is a 404 like any other (not the board's 500).
    const unknown = await call(env.app, "GET", "/ops/queues/api/no-such-thing", { headers: RIGHT });
    expect({ status: unknown.status, code: unknown.body?.error?.code }).toEqual({
      status: 404,
      code: "resource_missing",
    });
    // The UI's client-side routes render the same page.
    expect((await call(env.app, "GET", "/ops/queues/queue/send", { headers: RIGHT })).text).toContain(
      '<div id="root">',
    );
  });

  test("every queue with its counts; a failed job shows its reason and is retried from the dashboard", async () => {
    const queue = env.deps.queues.finalize;
    await queue.add("finalize", { providerMessageId: "wamid.dashboard-1" }, { jobId: "in-dashboard-1" });
    await workJob(env, "finalize", "in-dashboard-1", "failed", async () => {
      throw new Error("provider exploded");
    });

    const list = await call(
      env.app,
      "GET",
      "/ops/queues/api/queues?activeQueue=finalize&status=failed&page=1",
      {
        headers: RIGHT,
      },
    );
    expect(list.status).toBe(200);
    const queues = list.body.queues as { name: string; counts: Record<string, number>; jobs: unknown[] }[];
    expect(queues.map((q) => q.name).sort()).toEqual(["finalize", "send", "status", "webhook"]);
    const finalize = queues.find((q) => q.name === "finalize")!;
    expect(finalize.counts.failed).toBe(1);
    expect(finalize.jobs).toEqual([
      expect.objectContaining({ id: "in-dashboard-1", failedReason: "provider exploded" }),
    ]);

    // The board parses bodies again from the bytes the pipeline read: an edit arrives intact.
    const edit = await call(env.app, "PATCH", "/ops/queues/api/queues/finalize/in-dashboard-1/update-data", {
      headers: RIGHT,
      body: { jobData: { providerMessageId: "wamid.dashboard-1", note: "edited" } },
    });
    expect(edit.status).toBe(200);
    expect((await queue.getJob("in-dashboard-1"))?.data).toEqual({
      providerMessageId: "wamid.dashboard-1",
      note: "edited",
    } as never);

    const retry = await call(env.app, "PUT", "/ops/queues/api/queues/finalize/in-dashboard-1/retry", {
      headers: RIGHT,
    });
    expect(retry.status).toBe(204);
    expect(await queue.getJobState("in-dashboard-1")).toBe("waiting");
    await queue.remove("in-dashboard-1");
  });

  test("completed jobs are kept for the history (the last thousand, an hour)", async () => {
    const queue = env.deps.queues.status;
    await queue.add("drain", { nudgedAt: Date.now() }, { jobId: "dashboard-done-1" });
    await workJob(env, "status", "dashboard-done-1", "completed");
    const list = await call(
      env.app,
      "GET",
      "/ops/queues/api/queues?activeQueue=status&status=completed&page=1",
      {
        headers: RIGHT,
      },
    );
    const status = (list.body.queues as { name: string; jobs: { id: string }[] }[]).find(
      (q) => q.name === "status",
    )!;
    expect(status.jobs.map((j) => j.id)).toContain("dashboard-done-1");
    await queue.remove("dashboard-done-1");
  });

  test("a cross-site request cannot act through an operator's browser", async () => {
    const result = await call(env.app, "PUT", "/ops/queues/api/queues/pause", {
      headers: { ...RIGHT, "sec-fetch-site": "cross-site" },
    });
    expect(result.status).toBe(403);
    expect(await env.deps.queues.send.isPaused()).toBe(false);
    // Reading is fine from anywhere the credentials are.
    const read = await call(env.app, "GET", "/ops/queues/api/queues", {
      headers: { ...RIGHT, "sec-fetch-site": "cross-site" },
    });
    expect(read.status).toBe(200);
  });
});

describe("without OPS_USER and OPS_PASSWORD", () => {
  test("production: /metrics and /ops/queues do not exist (404 like any unknown path)", async () => {
    const config = loadConfig({
      NODE_ENV: "production",
      JWT_SECRET: "a-production-secret-of-at-least-32-characters",
      WHATSAPP_APP_SECRET: "production-app-secret",
      WHATSAPP_VERIFY_TOKEN: "production-verify-token",
      PROVIDER_TOKEN_KEY: "ab".repeat(32),
      DATABASE_URL: env.config.databaseUrl,
      REDIS_URL: env.config.redisUrl,
      REDIS_PREFIX: env.config.redisPrefix,
    });
    expect(config.isProduction).toBe(true);
    const app = createApp({ ...env.deps, config });
    for (const path of OPS_PATHS) {
      for (const headers of [{}, RIGHT]) {
        const result = await call(app, "GET", path, { headers });
        expect({ path, status: result.status }).toEqual({ path, status: 404 });
        expect(result.body.error.code).toBe("resource_missing");
      }
    }
  });

  test("development: open without credentials", async () => {
    const config = loadConfig({
      NODE_ENV: "development",
      DATABASE_URL: env.config.databaseUrl,
      REDIS_URL: env.config.redisUrl,
      REDIS_PREFIX: env.config.redisPrefix,
    });
    const app = createApp({ ...env.deps, config });
    expect((await call(app, "GET", "/metrics")).status).toBe(200);
    expect((await call(app, "GET", "/ops/queues")).status).toBe(200);
  });
});
