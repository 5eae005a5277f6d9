/**
 * Issue 11, "insecure defaults whenever NODE_ENV is unset" and "TRUST_PROXY=1 takes the leftmost
 * X-Forwarded-For": the findings replayed, each asserting the safe outcome. Development defaults
 * apply only with NODE_ENV=development set explicitly; anything else without the secrets refuses to
 * start.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { ManualClock } from "../../src/clock.ts";
import { DEV_JWT_SECRET, loadConfig } from "../../src/config.ts";
import { createTokenService } from "../../src/oauth/tokens.ts";
import { clientIpOf } from "../../src/pipeline/request-pipeline.ts";
import {
  call,
  createTenantWithApp,
  createTestEnv,
  getToken,
  nextSecond,
  type TestEnv,
} from "../support/index.ts";
import { createPanelUserWithTenant, PanelClient } from "../support/panel.ts";

const SECRETS = {
  JWT_SECRET: "a-real-secret-of-at-least-32-characters!",
  WHATSAPP_APP_SECRET: "a-real-app-secret",
  WHATSAPP_VERIFY_TOKEN: "a-real-verify-token",
  PROVIDER_TOKEN_KEY: "ab".repeat(32),
};
const REQUIRED = Object.keys(SECRETS) as (keyof typeof SECRETS)[];

/** process.env without NODE_ENV and the secrets: what a deployment that forgot them looks like. */
function forgottenEnv(): Record<string, string | undefined> {
  const env = { ...process.env };
  for (const name of ["NODE_ENV", ...REQUIRED]) delete env[name];
  return env;
}

describe("secrets are required unless NODE_ENV=development", () => {
  test("each missing secret is named, whatever NODE_ENV is (unset, empty, test, staging, production)", () => {
    for (const nodeEnv of [undefined, "", "test", "staging", "production", "Development"]) {
      for (const missing of REQUIRED) {
        const env: Record<string, string | undefined> = { ...SECRETS, NODE_ENV: nodeEnv };
        delete env[missing];
        expect({ nodeEnv, missing, thrown: thrownBy(() => loadConfig(env)) }).toEqual({
          nodeEnv,
          missing,
          thrown: `${missing} is required unless NODE_ENV=development`,
        });
      }
    }
  });

  test("NODE_ENV=development alone still starts with the public defaults", () => {
    const config = loadConfig({ NODE_ENV: "development" });
    expect(config.jwtSecret).toBe(DEV_JWT_SECRET);
    expect(config.isDevelopment).toBe(true);
  });

  for (const entrypoint of ["src/server.ts", "workers/send.ts"]) {
    test(`bun ${entrypoint} with NODE_ENV unset and no secrets exits 1 with one line`, async () => {
      const proc = Bun.spawn(["bun", entrypoint], { env: forgottenEnv(), stdout: "pipe", stderr: "pipe" });
      // If it starts anyway (the finding), stop it rather than wait for the test timeout.
      const started = setTimeout(() => proc.kill(), 10_000);
      const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
      clearTimeout(started);
      expect(code).toBe(1);
      expect(stderr.trim()).toBe("configuration error: JWT_SECRET is required unless NODE_ENV=development");
    });
  }

  test("OPS_PASSWORD of 15 characters is refused, in development too", () => {
    for (const nodeEnv of ["development", "production", undefined]) {
      const env = { NODE_ENV: nodeEnv, ...SECRETS, OPS_USER: "operator", OPS_PASSWORD: "fifteen-chars!!" };
      expect(thrownBy(() => loadConfig(env))).toBe("OPS_PASSWORD must be at least 16 characters");
    }
  });
});

describe("NODE_ENV unset, secrets given: nothing insecure by default", () => {
  let unset: TestEnv;
  let production: TestEnv;
  let development: TestEnv;
  beforeAll(async () => {
    // "" is how createTestEnv's options say "unset" (loadConfig treats both alike).
    [unset, production, development] = await Promise.all([
      createTestEnv({ env: { NODE_ENV: "", ...SECRETS } }),
      createTestEnv({ env: { NODE_ENV: "production", ...SECRETS } }),
      createTestEnv(),
    ]);
  });
  afterAll(() => Promise.all([unset.close(), production.close(), development.close()]));

  /** A token anyone can make: the development key is public (src/config.ts). */
  async function forgedToken(tenantId: string, clientId: string): Promise<string> {
    const forger = createTokenService(DEV_JWT_SECRET, new ManualClock());
    const { token } = await forger.issue({
      tenantId,
      clientId,
      scopes: ["messaging:read", "messaging:send"],
      readLimit: 1000,
      sendLimit: 1000,
    });
    return token;
  }

  test("a token forged with the development key is refused (401); a real one is not", async () => {
    for (const env of [unset, production]) {
      const victim = await createTenantWithApp(env.deps, { name: "Tenant B" });
      const forged = await forgedToken(victim.tenant.id, victim.clientId);
      const refused = await call(env.app, "GET", "/v2/senders", { token: forged });
      expect({ nodeEnv: env.config.nodeEnv, status: refused.status }).toEqual({
        nodeEnv: env.config.nodeEnv,
        status: 401,
      });
      const real = await getToken(env.app, victim.clientId, victim.clientSecret);
      expect((await call(env.app, "GET", "/v2/senders", { token: real })).status).toBe(200);
    }
  });

  test("(control) in development the same forgery works: the key really is public there", async () => {
    const victim = await createTenantWithApp(development.deps, { name: "Tenant B" });
    const forged = await forgedToken(victim.tenant.id, victim.clientId);
    expect((await call(development.app, "GET", "/v2/senders", { token: forged })).status).toBe(200);
  });

  test("/ops/queues and /metrics do not exist without OPS_USER/OPS_PASSWORD", async () => {
    for (const path of ["/ops/queues", "/ops/queues/api/queues", "/metrics"]) {
      const result = await call(unset.app, "GET", path);
      expect({ path, status: result.status }).toEqual({ path, status: 404 });
    }
    // Development (set explicitly) keeps them open, as the README says.
    expect((await call(development.app, "GET", "/metrics")).status).toBe(200);
  });

  test("panel cookies carry Secure", async () => {
    const { email, password } = await createPanelUserWithTenant(unset.deps);
    const client = new PanelClient(unset.app);
    const form = await client.get("/panel/sign-in");
    const formCookies = form.headers.getSetCookie();
    expect(formCookies.length).toBeGreaterThan(0);
    for (const cookie of formCookies) expect(cookie).toContain("Secure");

    const signIn = await client.post("/panel/sign-in", { email, password });
    expect(signIn.status).toBe(303);
    const session = signIn.headers.getSetCookie().find((c) => c.startsWith("panel_session="));
    expect(session).toContain("Secure");
    expect(session).toContain("HttpOnly");
  });
});

describe("TRUST_PROXY=N: the client is the Nth X-Forwarded-For address from the right", () => {
  let env: TestEnv;
  beforeAll(async () => {
    env = await createTestEnv({ env: { TRUST_PROXY: "1" }, limits: { anonymous: 3 } });
  });
  afterAll(() => env.close());

  /** Anonymous requests (the per-IP limit), each with its own X-Forwarded-For. */
  async function statuses(app: TestEnv["app"], forwardedFor: string[]): Promise<number[]> {
    const result = [];
    for (const header of forwardedFor) {
      result.push((await call(app, "GET", "/v2/nope", { headers: { "x-forwarded-for": header } })).status);
    }
    return result;
  }

  test("TRUST_PROXY=1: spoofed leftmost values share the rightmost address's bucket", async () => {
    expect(env.config.trustProxy).toBe(1);
    await nextSecond();
    const spoofed = ["6.6.6.6, 1.2.3.4", "6.6.6.7, 1.2.3.4", "6.6.6.8, 1.2.3.4", "6.6.6.9, 1.2.3.4"];
    expect(await statuses(env.app, spoofed)).toEqual([404, 404, 404, 429]);
    // Another client (another rightmost address) has its own allowance.
    expect(await statuses(env.app, ["6.6.6.6, 1.2.3.5"])).toEqual([404]);
  });

  test("TRUST_PROXY=2: the second address from the right is the client", async () => {
    const twoProxies = createApp({ ...env.deps, config: { ...env.config, trustProxy: 2 } });
    await nextSecond();
    const spoofed = [
      "7.7.7.1, 2.3.4.5, 10.0.0.1",
      "7.7.7.2, 2.3.4.5, 10.0.0.1",
      "2.3.4.5, 10.0.0.2",
      "7.7.7.4, 2.3.4.5, 10.0.0.1",
    ];
    expect(await statuses(twoProxies, spoofed)).toEqual([404, 404, 404, 429]);
    expect(await statuses(twoProxies, ["7.7.7.1, 2.3.4.6, 10.0.0.1"])).toEqual([404]);
  });

  test("fewer entries than proxies: the leftmost; no header: the socket address; 0: header ignored", () => {
    const server = { requestIP: () => ({ address: "192.0.2.1" }) };
    const request = (forwardedFor?: string) =>
      new Request("http://localhost/", {
        headers: forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor },
      });
    expect(clientIpOf(request("1.1.1.1, 2.2.2.2"), server, 3)).toBe("1.1.1.1");
    expect(clientIpOf(request(" 3.3.3.3 "), server, 1)).toBe("3.3.3.3");
    expect(clientIpOf(request(), server, 1)).toBe("192.0.2.1");
    expect(clientIpOf(request(" , "), server, 1)).toBe("192.0.2.1");
    expect(clientIpOf(request("1.1.1.1"), server, 0)).toBe("192.0.2.1");
    expect(clientIpOf(request(`1.1.1.1, ${"x".repeat(500)}`), server, 1)).toHaveLength(64);
  });
});

function thrownBy(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return (error as Error).message;
  }
  return undefined;
}
