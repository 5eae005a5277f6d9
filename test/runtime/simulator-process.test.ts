import { describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";
import { eventually, freePort } from "../support/index.ts";

/**
 * The simulator process signs the webhooks it posts with the app secret, so whoever reaches it can
 * have it post a signed STOP (issue 42, item 7): it refuses NODE_ENV=production, and listens on
 * loopback unless SIMULATOR_HOST says otherwise.
 */

/** What production requires, so that configuration passes and the simulator's own check decides. */
const PRODUCTION_ENV = {
  NODE_ENV: "production",
  JWT_SECRET: "a-production-secret-of-at-least-32-characters",
  PROVIDER_TOKEN_KEY: "11".repeat(32),
  WHATSAPP_APP_SECRET: "production-app-secret",
  WHATSAPP_VERIFY_TOKEN: "production-verify-token",
};

function spawnSimulator(env: Record<string, string>) {
  return Bun.spawn(["bun", "src/simulator/server.ts"], {
    env: { ...process.env, NODE_ENV: "development", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
}

/** Whether a TCP connection to host:port is accepted. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 2000 });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolve(false);
    });
  });
}

/** This machine's addresses that are not loopback (none in some sandboxes). */
function nonLoopbackAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((entry) => entry && !entry.internal && entry.family === "IPv4")
    .map((entry) => entry?.address ?? "");
}

describe("the simulator process", () => {
  test("refuses NODE_ENV=production: exits non-zero with a message, without listening", async () => {
    const port = await freePort();
    const simulator = spawnSimulator({ ...PRODUCTION_ENV, SIMULATOR_PORT: String(port) });
    const code = await Promise.race([simulator.exited, Bun.sleep(15_000).then(() => "still running")]);
    simulator.kill("SIGKILL");
    expect(code).not.toBe(0);
    expect(code).not.toBe("still running");
    const stderr = await new Response(simulator.stderr).text();
    expect(stderr).toContain("NODE_ENV=production");
    expect(stderr).toContain("WHATSAPP_GRAPH_URL");
    expect(await accepts("127.0.0.1", port)).toBe(false);
  }, 30_000);

  test("listens on 127.0.0.1 only by default", async () => {
    const port = await freePort();
    const simulator = spawnSimulator({ SIMULATOR_PORT: String(port) });
    try {
      await eventually(
        async () => (await fetch(`http://127.0.0.1:${port}/_sim/health`).catch(() => null))?.ok,
      );
      // 127.0.0.2 is this machine too (all of 127/8 is loopback), but not the address it is bound to.
      expect(await accepts("127.0.0.2", port)).toBe(false);
      for (const address of nonLoopbackAddresses()) expect(await accepts(address, port)).toBe(false);
    } finally {
      simulator.kill("SIGKILL");
      await simulator.exited;
    }
  }, 30_000);

  test("SIMULATOR_HOST=0.0.0.0 listens on every address, as told", async () => {
    const port = await freePort();
    const simulator = spawnSimulator({ SIMULATOR_PORT: String(port), SIMULATOR_HOST: "0.0.0.0" });
    try {
      await eventually(
        async () => (await fetch(`http://127.0.0.1:${port}/_sim/health`).catch(() => null))?.ok,
      );
      expect(await accepts("127.0.0.2", port)).toBe(true);
    } finally {
      simulator.kill("SIGKILL");
      await simulator.exited;
    }
  }, 30_000);
});

describe("bun run start in production", () => {
  test("without WHATSAPP_GRAPH_URL: exits non-zero, saying to set it, having started nothing", async () => {
    const port = await freePort();
    const simulatorPort = await freePort();
    const env: Record<string, string | undefined> = {
      ...process.env,
      ...PRODUCTION_ENV,
      PORT: String(port),
      SIMULATOR_PORT: String(simulatorPort),
      // Should the check ever let it through: servers it can neither reach nor start (TEST-NET-1).
      DATABASE_URL: "postgres://postgres@192.0.2.1:5432/never",
      REDIS_URL: "redis://192.0.2.1:6379/0",
    };
    delete env.WHATSAPP_GRAPH_URL;
    const start = Bun.spawn(["bun", "scripts/start.ts"], {
      env,
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const code = await Promise.race([start.exited, Bun.sleep(15_000).then(() => "still running")]);
    start.kill("SIGKILL");
    expect(code).not.toBe("still running");
    expect(code).not.toBe(0);
    const stderr = await new Response(start.stderr).text();
    expect(stderr).toContain("set WHATSAPP_GRAPH_URL");
    expect(await accepts("127.0.0.1", simulatorPort)).toBe(false);
    expect(await accepts("127.0.0.1", port)).toBe(false);
  }, 30_000);
});
