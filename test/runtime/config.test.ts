import { describe, expect, test } from "bun:test";
import { ConfigError, DEV_JWT_SECRET, loadConfig } from "../../src/config.ts";

const DEV = { NODE_ENV: "development" };
const SECRETS = {
  JWT_SECRET: "s".repeat(40),
  WHATSAPP_APP_SECRET: "app-secret",
  WHATSAPP_VERIFY_TOKEN: "verify-token",
  PROVIDER_TOKEN_KEY: "ab".repeat(32),
};

describe("configuration", () => {
  test("defaults match DESIGN §2 (NODE_ENV=development)", () => {
    const config = loadConfig(DEV);
    expect(config.isDevelopment).toBe(true);
    expect(config.isProduction).toBe(false);
    expect(config.port).toBe(3000);
    expect(config.publicBaseUrl).toBe("http://localhost:3000/v2");
    expect(config.databaseUrl).toBe("postgres://postgres@127.0.0.1:5432/messaging");
    expect(config.redisUrl).toBe("redis://127.0.0.1:6379/0");
    expect(config.redisClusterNodes).toEqual([]);
    expect(config.redisPrefix).toBe("msg");
    expect(config.jwtSecret).toBe(DEV_JWT_SECRET);
    expect(config.useSimulator).toBe(true);
    expect(config.whatsappGraphUrl).toBe("http://127.0.0.1:3001");
    expect(config.whatsappAppSecret).toBe("dev-app-secret");
    expect(config.whatsappVerifyToken).toBe("dev-verify-token");
    expect(config.dailySendQuota).toBe(10_000);
    expect(config.logLevel).toBe("info");
    expect(config.trustProxy).toBe(0);
    expect(config.databaseReadUrl).toBeUndefined();
    expect(config.readYourWritesSeconds).toBe(300);
    expect(config.processes).toEqual({ api: 1, send: 1, status: 1, finalize: 1, webhook: 1 });
    expect(config.webhooks).toEqual({
      allowPrivateUrls: true,
      endpointsPerWorker: 50,
      maxInFlight: 200,
      timeoutMs: 10_000,
      retryBaseMs: 5000,
    });
    expect(config.workers.feedShards).toBe(1);
  });

  test("REDIS_CLUSTER_NODES: comma-separated host:port seed nodes", () => {
    const config = loadConfig({
      ...DEV,
      REDIS_CLUSTER_NODES: "10.0.0.1:7000, redis-2.internal:7001,[::1]:7002",
    });
    expect(config.redisClusterNodes).toEqual([
      { host: "10.0.0.1", port: 7000 },
      { host: "redis-2.internal", port: 7001 },
      { host: "::1", port: 7002 },
    ]);
  });

  test("a malformed value is refused with a message naming the variable", () => {
    const cases: [Record<string, string>, string][] = [
      [{ PORT: "http" }, "PORT"],
      [{ PORT: "70000" }, "PORT"],
      [{ DATABASE_URL: "mysql://x/y" }, "DATABASE_URL"],
      [{ DATABASE_READ_URL: "replica:5432" }, "DATABASE_READ_URL"],
      [{ READ_YOUR_WRITES_SECONDS: "0" }, "READ_YOUR_WRITES_SECONDS"],
      [{ REDIS_URL: "not a url" }, "REDIS_URL"],
      [{ REDIS_CLUSTER_NODES: "127.0.0.1" }, "REDIS_CLUSTER_NODES"],
      [{ REDIS_CLUSTER_NODES: "127.0.0.1:7000,,127.0.0.1:7001" }, "REDIS_CLUSTER_NODES"],
      [{ REDIS_CLUSTER_NODES: "redis://127.0.0.1:7000" }, "REDIS_CLUSTER_NODES"],
      [{ REDIS_CLUSTER_NODES: "127.0.0.1:0" }, "REDIS_CLUSTER_NODES"],
      [{ DAILY_SEND_QUOTA: "-1" }, "DAILY_SEND_QUOTA"],
      [{ LOG_LEVEL: "loud" }, "LOG_LEVEL"],
      [{ REDIS_PREFIX: "has space" }, "REDIS_PREFIX"],
      [{ OPS_USER: "ops" }, "OPS_USER"],
      [{ OPS_USER: "ops", OPS_PASSWORD: "fifteen-chars!!" }, "OPS_PASSWORD"],
      [{ JWT_SECRET: "short" }, "JWT_SECRET"],
      [{ TRUST_PROXY: "11" }, "TRUST_PROXY"],
      [{ TRUST_PROXY: "yes" }, "TRUST_PROXY"],
      [{ TRUST_PROXY: "-1" }, "TRUST_PROXY"],
      [{ API_PROCESSES: "0" }, "API_PROCESSES"],
      [{ SEND_WORKERS: "two" }, "SEND_WORKERS"],
      [{ STATUS_WORKERS: "65" }, "STATUS_WORKERS"],
      [{ FINALIZE_WORKERS: "1.5" }, "FINALIZE_WORKERS"],
      [{ FEED_SHARDS: "0" }, "FEED_SHARDS"],
      [{ FEED_SHARDS: "257" }, "FEED_SHARDS"],
    ];
    for (const [env, name] of cases) {
      expect(() => loadConfig({ ...DEV, ...env })).toThrow(ConfigError);
      expect(() => loadConfig({ ...DEV, ...env })).toThrow(name);
    }
  });

  test("JWT_SECRET unset outside NODE_ENV=development refuses to start", () => {
    const { JWT_SECRET: _, ...webhookSecrets } = SECRETS;
    for (const nodeEnv of ["production", "test", "staging", undefined]) {
      expect(() => loadConfig({ NODE_ENV: nodeEnv, ...webhookSecrets })).toThrow(
        "JWT_SECRET is required unless NODE_ENV=development",
      );
    }
    expect(loadConfig({ NODE_ENV: "production", ...SECRETS }).jwtSecret).toBe("s".repeat(40));
  });

  test("the webhook secrets have no public default outside development", () => {
    for (const nodeEnv of ["production", "test", undefined]) {
      const base = { NODE_ENV: nodeEnv, JWT_SECRET: "s".repeat(40), PROVIDER_TOKEN_KEY: "ab".repeat(32) };
      expect(() => loadConfig({ ...base, WHATSAPP_VERIFY_TOKEN: "v" })).toThrow(
        "WHATSAPP_APP_SECRET is required unless NODE_ENV=development",
      );
      expect(() => loadConfig({ ...base, WHATSAPP_APP_SECRET: "a" })).toThrow(
        "WHATSAPP_VERIFY_TOKEN is required unless NODE_ENV=development",
      );
      const config = loadConfig({ ...base, WHATSAPP_APP_SECRET: "a", WHATSAPP_VERIFY_TOKEN: "v" });
      expect([config.whatsappAppSecret, config.whatsappVerifyToken]).toEqual(["a", "v"]);
      expect(config.isDevelopment).toBe(false);
    }
  });

  test("only NODE_ENV=development is development; production is still told apart", () => {
    expect(loadConfig({ ...SECRETS }).isDevelopment).toBe(false);
    expect(loadConfig({ ...SECRETS }).nodeEnv).toBe("");
    expect(loadConfig({ NODE_ENV: "staging", ...SECRETS }).isProduction).toBe(false);
    expect(loadConfig({ NODE_ENV: "production", ...SECRETS }).isProduction).toBe(true);
  });

  test("OPS_PASSWORD needs at least 16 characters, in development too", () => {
    for (const nodeEnv of ["development", "production", undefined]) {
      expect(() =>
        loadConfig({ NODE_ENV: nodeEnv, ...SECRETS, OPS_USER: "ops", OPS_PASSWORD: "x".repeat(15) }),
      ).toThrow("OPS_PASSWORD must be at least 16 characters");
      const config = loadConfig({
        NODE_ENV: nodeEnv,
        ...SECRETS,
        OPS_USER: "ops",
        OPS_PASSWORD: "x".repeat(16),
      });
      expect(config.opsPassword).toBe("x".repeat(16));
    }
  });

  test("TRUST_PROXY is a count of our proxies; true/false still mean 1/0", () => {
    const cases: [string | undefined, number][] = [
      [undefined, 0],
      ["", 0],
      ["0", 0],
      ["false", 0],
      ["true", 1],
      ["1", 1],
      ["2", 2],
      ["10", 10],
    ];
    for (const [raw, count] of cases) {
      expect({ raw, count: loadConfig({ ...DEV, TRUST_PROXY: raw }).trustProxy }).toEqual({ raw, count });
    }
  });

  test("the api process exits with one line naming the variable", async () => {
    const proc = Bun.spawn(["bun", "src/server.ts"], {
      env: { ...process.env, NODE_ENV: "production", JWT_SECRET: "" },
      stderr: "pipe",
      stdout: "pipe",
    });
    const code = await proc.exited;
    const stderr = await new Response(proc.stderr).text();
    expect(code).toBe(1);
    expect(stderr.trim()).toBe("configuration error: JWT_SECRET is required unless NODE_ENV=development");
  });
});
