import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { TOKEN_AUTH_FAILURES } from "../../src/oauth/routes.ts";
import { OPS_AUTH_FAILURES } from "../../src/ops/guard.ts";
import { failureDelayMs, SIGN_IN_LIMITS } from "../../src/panel/sign-in.ts";
import {
  call,
  createTenantWithApp,
  createTestEnv,
  nextSecond,
  type TestEnv,
  workJob,
} from "../support/index.ts";
import { createPanelUserWithTenant, PanelClient } from "../support/panel.ts";

/**
 * Limits that an attacker cannot turn against others (issue 11): failed credentials are counted per
 * address, apart from the victim's own budget. Tests cannot change the socket address, so the app
 * trusts one proxy and each "address" is a single-address X-Forwarded-For (the client under either
 * reading of TRUST_PROXY=1).
 */

const OPS_USER = "operator";
const OPS_PASSWORD = "a-long-operator-password";
const from = (ip: string) => ({ "x-forwarded-for": ip });
const basic = (user: string, password: string) => ({
  authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`,
});

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv({
    env: { TRUST_PROXY: "1", OPS_USER, OPS_PASSWORD },
    // SPEC's token limit per client_id; the per-IP limits stay out of the way (support.ts).
    limits: { token: 2 },
  });
});
afterAll(() => env.close());

describe("token endpoint: failed client authentications are counted per IP, apart from the client's budget", () => {
  const TOKEN = "/v2/oauth/token";
  const tokenCall = (ip: string, body: Record<string, unknown>) =>
    call(env.app, "POST", TOKEN, { body, headers: from(ip) });

  test("three wrong secrets naming B's client_id do not use up B's budget", async () => {
    const b = await createTenantWithApp(env.deps);
    await nextSecond();
    for (let i = 0; i < 3; i++) {
      const wrong = await tokenCall("198.51.100.1", {
        grant_type: "client_credentials",
        client_id: b.clientId,
        client_secret: `wrong-${i}`,
      });
      expect(wrong.status).toBe(401);
      expect(wrong.body.error).toBe("invalid_client");
    }
    const right = await tokenCall("198.51.100.2", {
      grant_type: "client_credentials",
      client_id: b.clientId,
      client_secret: b.clientSecret,
    });
    expect(right.status).toBe(200);
    // B's bucket counted B's verified request only.
    expect(right.headers.get("ratelimit-limit")).toBe("2");
    expect(right.headers.get("ratelimit-policy")).toBe("2;w=1");
    expect(right.headers.get("ratelimit-remaining")).toBe("1");
  });

  test("an IP that keeps failing gets 429 (its right guesses too); another IP is not affected", async () => {
    const b = await createTenantWithApp(env.deps);
    const attacker = "198.51.100.3";
    // Random client_ids and wrong secrets both count.
    for (let i = 0; i < TOKEN_AUTH_FAILURES.perIp; i++) {
      const wrong = await tokenCall(attacker, {
        grant_type: "client_credentials",
        client_id: i % 2 === 0 ? `cid_random${i}` : b.clientId,
        client_secret: `guess-${i}`,
      });
      expect(wrong.status).toBe(401);
      expect(wrong.headers.get("ratelimit-limit")).toBe(String(TOKEN_AUTH_FAILURES.perIp));
      expect(wrong.headers.get("ratelimit-remaining")).toBe(String(TOKEN_AUTH_FAILURES.perIp - i - 1));
    }
    for (const secret of ["one more guess", b.clientSecret]) {
      const refused = await tokenCall(attacker, {
        grant_type: "client_credentials",
        client_id: b.clientId,
        client_secret: secret,
      });
      expect(refused.status).toBe(429);
      expect(refused.body).toEqual({
        error: "rate_limit_exceeded",
        error_description: expect.stringContaining("failed client authentications"),
        request_id: refused.headers.get("request-id"),
      });
      expect(refused.headers.get("cache-control")).toBe("no-store");
      const retryAfter = Number(refused.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(TOKEN_AUTH_FAILURES.windowSeconds);
      expect(refused.headers.get("ratelimit-remaining")).toBe("0");
    }
    await nextSecond();
    const other = await tokenCall("198.51.100.4", {
      grant_type: "client_credentials",
      client_id: b.clientId,
      client_secret: b.clientSecret,
    });
    expect(other.status).toBe(200);
  });

  test("requests that are not authentication failures are not counted", async () => {
    const ip = "198.51.100.5";
    for (let i = 0; i < TOKEN_AUTH_FAILURES.perIp + 2; i++) {
      const result = await tokenCall(ip, { grant_type: "password", client_id: "x", client_secret: "y" });
      expect(result.status).toBe(400);
      expect(result.body.error).toBe("unsupported_grant_type");
    }
  });
});

describe("panel sign-in: nobody can lock someone else's account", () => {
  /** A sign-in post from `ip` (the form's token comes from the client's last page). */
  async function signIn(client: PanelClient, ip: string, email: string, password: string) {
    if (!client.csrf) await client.get("/panel/sign-in");
    return client.request("POST", "/panel/sign-in", {
      form: { _csrf: client.csrf, email, password },
      headers: from(ip),
    });
  }

  test("failure delays grow 1, 2, 4 ... up to 10 s once the account is over its limit", () => {
    const over = (n: number) => failureDelayMs(SIGN_IN_LIMITS.perAccount + n);
    expect([0, 1, 2, 3, 4, 5, 50].map(over)).toEqual([0, 1000, 2000, 4000, 8000, 10_000, 10_000]);
  });

  test("10 wrong passwords from X; the right one from Y signs in; X is refused, later wrong ones are slowed", async () => {
    const { email, password } = await createPanelUserWithTenant(env.deps);
    const attacker = new PanelClient(env.app);
    for (let i = 0; i < SIGN_IN_LIMITS.perAccount; i++) {
      expect((await signIn(attacker, "203.0.113.1", email, `guess-${i}-xxxx`)).status).toBe(401);
    }
    const refused = await signIn(attacker, "203.0.113.1", email, "guess-next-xxxx");
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(refused.text).toContain("Too many sign-in attempts");

    const owner = new PanelClient(env.app);
    const signedIn = await signIn(owner, "203.0.113.2", email, password);
    expect(signedIn.status).toBe(303);
    expect(owner.cookies.has("panel_session")).toBe(true);

    // The account is over its failure limit: a wrong password from a fresh address is answered,
    // but only after a wait.
    const startedAt = performance.now();
    const slowed = await signIn(new PanelClient(env.app), "203.0.113.3", email, "another-guess-xx");
    expect(slowed.status).toBe(401);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(
      failureDelayMs(SIGN_IN_LIMITS.perAccount + 1),
    );
  });

  test("an unknown email is throttled exactly like a known one", async () => {
    const { email } = await createPanelUserWithTenant(env.deps);
    const answers: { status: number; text: string }[][] = [];
    for (const address of [email, "nobody-here@example.com"]) {
      const client = new PanelClient(env.app);
      const statuses = [];
      for (let i = 0; i <= SIGN_IN_LIMITS.perAccountAndIp; i++) {
        const result = await signIn(client, "203.0.113.4", address, `guess-${i}-xxxx`);
        statuses.push({ status: result.status, text: result.text.includes("Too many") ? "throttled" : "" });
      }
      answers.push(statuses);
      await env.deps.redis.del(env.deps.keys.signInByIp("203.0.113.4"));
    }
    expect(answers[0]).toEqual(answers[1]!);
    expect(answers[0]!.at(-1)).toEqual({ status: 429, text: "throttled" });
  });

  test("the per-IP limit holds for everything, the right password too", async () => {
    const { email, password } = await createPanelUserWithTenant(env.deps);
    const client = new PanelClient(env.app);
    for (let i = 0; i < SIGN_IN_LIMITS.perIp; i++) {
      expect((await signIn(client, "203.0.113.5", `someone-${i}@example.com`, "wrong-password")).status).toBe(
        401,
      );
    }
    expect((await signIn(client, "203.0.113.5", email, password)).status).toBe(429);
    expect((await signIn(client, "203.0.113.6", email, password)).status).toBe(303);
  });
});

describe("operator endpoints", () => {
  test("wrong credentials are throttled per IP: 429 even for the right ones, other IPs unaffected", async () => {
    const ip = "192.0.2.1";
    for (let i = 0; i < OPS_AUTH_FAILURES.perIp; i++) {
      const wrong = await call(env.app, "GET", "/metrics", {
        headers: { ...from(ip), ...basic(OPS_USER, `guess-${i}`) },
      });
      expect(wrong.status).toBe(401);
    }
    for (const headers of [basic(OPS_USER, "guess-next"), basic(OPS_USER, OPS_PASSWORD)]) {
      const refused = await call(env.app, "GET", "/ops/queues/api/queues", {
        headers: { ...from(ip), ...headers },
      });
      expect(refused.status).toBe(429);
      expect(refused.body.error).toMatchObject({ type: "rate_limit_error", code: "rate_limit_exceeded" });
      const retryAfter = Number(refused.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(OPS_AUTH_FAILURES.windowSeconds);
    }
    const other = await call(env.app, "GET", "/metrics", {
      headers: { ...from("192.0.2.2"), ...basic(OPS_USER, OPS_PASSWORD) },
    });
    expect(other.status).toBe(200);
  });

  /** A failed finalize job, as a worker leaves it. */
  async function failedJob(jobId: string) {
    const queue = env.deps.queues.finalize;
    await queue.add("finalize", { providerMessageId: `wamid.${jobId}` }, { jobId });
    await workJob(env, "finalize", jobId, "failed", async () => {
      throw new Error("provider exploded");
    });
    return queue;
  }

  const RIGHT = { ...from("192.0.2.10"), ...basic(OPS_USER, OPS_PASSWORD) };

  test("the queue dashboard is read-only by default: reads work, every action is 403 and changes nothing", async () => {
    const queue = await failedJob("read-only-1");
    const list = await call(env.app, "GET", "/ops/queues/api/queues?activeQueue=finalize&status=failed", {
      headers: RIGHT,
    });
    expect(list.status).toBe(200);
    const finalize = (list.body.queues as { name: string; readOnlyMode: boolean }[]).find(
      (q) => q.name === "finalize",
    );
    expect(finalize?.readOnlyMode).toBe(true);

    const actions: [string, string, unknown?][] = [
      ["PUT", "/ops/queues/api/queues/finalize/read-only-1/retry"],
      ["PUT", "/ops/queues/api/queues/finalize/read-only-1/promote"],
      ["PUT", "/ops/queues/api/queues/finalize/read-only-1/clean"],
      ["PATCH", "/ops/queues/api/queues/finalize/read-only-1/update-data", { jobData: { x: 1 } }],
      ["PUT", "/ops/queues/api/queues/finalize/retry/failed"],
      ["PUT", "/ops/queues/api/queues/finalize/clean/failed"],
      ["PUT", "/ops/queues/api/queues/finalize/empty"],
      ["PUT", "/ops/queues/api/queues/finalize/obliterate"],
      ["PUT", "/ops/queues/api/queues/finalize/pause"],
      ["PUT", "/ops/queues/api/queues/pause"],
      ["POST", "/ops/queues/api/queues/finalize/add", { name: "x", data: {} }],
      ["DELETE", "/ops/queues/api/queues/finalize/read-only-1/clean"],
    ];
    for (const [method, path, body] of actions) {
      const result = await call(env.app, method, path, { headers: RIGHT, body });
      expect({ method, path, status: result.status }).toEqual({ method, path, status: 403 });
      expect(result.body.error).toMatchObject({ type: "permission_error", code: "insufficient_scope" });
      expect(result.body.error.message).toContain("OPS_QUEUES_WRITE=1");
    }
    expect(await queue.getJobState("read-only-1")).toBe("failed");
    expect((await queue.getJob("read-only-1"))?.data).toEqual({
      providerMessageId: "wamid.read-only-1",
    } as never);
    expect(await queue.getJobCounts("waiting", "failed")).toEqual({ waiting: 0, failed: 1 });
    expect(await queue.isPaused()).toBe(false);
    await queue.remove("read-only-1");
  });

  test("with OPS_QUEUES_WRITE=1 a retry works", async () => {
    const queue = await failedJob("writable-1");
    const app = createApp({ ...env.deps, config: { ...env.config, opsQueuesWrite: true } });
    const retry = await call(app, "PUT", "/ops/queues/api/queues/finalize/writable-1/retry", {
      headers: RIGHT,
    });
    expect(retry.status).toBe(204);
    expect(await queue.getJobState("writable-1")).toBe("waiting");
    await queue.remove("writable-1");
  });
});

describe("the API reference page", () => {
  test("does not persist the authorization (client secret, token) in the browser", async () => {
    const page = await call(env.app, "GET", "/v2/reference");
    expect(page.status).toBe(200);
    const init = /window\.ui = SwaggerUIBundle\((\{.*\})\);/.exec(page.text)?.[1];
    expect(init).toBeDefined();
    const options = JSON.parse(init!.replaceAll("\\u003c", "<"));
    expect(options.persistAuthorization).toBe(false);
    expect(page.text).not.toContain("localStorage");
  });
});
