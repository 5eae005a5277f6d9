import { describe, expect, test } from "bun:test";
import { ConfigError, DEV_JWT_SECRET, loadConfig } from "../src/config.ts";

describe("configuration", () => {
  test("defaults match DESIGN §2", () => {
    const config = loadConfig({});
    expect(config.port).toBe(3000);
    expect(config.publicBaseUrl).toBe("http://localhost:3000/v2");
    expect(config.databaseUrl).toBe("postgres://postgres@127.0.0.1:5432/messaging");
    expect(config.redisUrl).toBe("redis://127.0.0.1:6379/0");
    expect(config.redisPrefix).toBe("msg");
    expect(config.jwtSecret).toBe(DEV_JWT_SECRET);
    expect(config.useSimulator).toBe(true);
    expect(config.whatsappGraphUrl).toBe("http://127.0.0.1:3001");
    expect(config.whatsappAppSecret).toBe("dev-app-secret");
    expect(config.whatsappVerifyToken).toBe("dev-verify-token");
    expect(config.dailySendQuota).toBe(10_000);
    expect(config.logLevel).toBe("info");
  });

  test("a malformed value is refused with a message naming the variable", () => {
    const cases: [Record<string, string>, string][] = [
      [{ PORT: "http" }, "PORT"],
      [{ PORT: "70000" }, "PORT"],
      [{ DATABASE_URL: "mysql://x/y" }, "DATABASE_URL"],
      [{ REDIS_URL: "not a url" }, "REDIS_URL"],
      [{ DAILY_SEND_QUOTA: "-1" }, "DAILY_SEND_QUOTA"],
      [{ LOG_LEVEL: "loud" }, "LOG_LEVEL"],
      [{ REDIS_PREFIX: "has space" }, "REDIS_PREFIX"],
      [{ OPS_USER: "ops" }, "OPS_USER"],
      [{ JWT_SECRET: "short" }, "JWT_SECRET"],
    ];
    for (const [env, name] of cases) {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(name);
    }
  });

  test("JWT_SECRET unset with NODE_ENV=production refuses to start", () => {
    const webhookSecrets = { WHATSAPP_APP_SECRET: "app-secret", WHATSAPP_VERIFY_TOKEN: "verify-token" };
    expect(() => loadConfig({ NODE_ENV: "production", ...webhookSecrets })).toThrow("JWT_SECRET");
    expect(
      loadConfig({ NODE_ENV: "production", JWT_SECRET: "s".repeat(40), ...webhookSecrets }).jwtSecret,
    ).toBe("s".repeat(40));
  });

  test("the webhook secrets have no public default in production", () => {
    const base = { NODE_ENV: "production", JWT_SECRET: "s".repeat(40) };
    expect(() => loadConfig({ ...base, WHATSAPP_VERIFY_TOKEN: "v" })).toThrow(
      "WHATSAPP_APP_SECRET is required when NODE_ENV=production",
    );
    expect(() => loadConfig({ ...base, WHATSAPP_APP_SECRET: "a" })).toThrow(
      "WHATSAPP_VERIFY_TOKEN is required when NODE_ENV=production",
    );
    const config = loadConfig({ ...base, WHATSAPP_APP_SECRET: "a", WHATSAPP_VERIFY_TOKEN: "v" });
    expect([config.whatsappAppSecret, config.whatsappVerifyToken]).toEqual(["a", "v"]);
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
    expect(stderr.trim()).toBe("configuration error: JWT_SECRET is required when NODE_ENV=production");
  });
});
