import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { localRedisArgs } from "../../scripts/services.ts";
import { createTestEnv, eventually, freePort, type TestEnv } from "../support/index.ts";

/**
 * Redis killed and restarted under an api and a worker (issue 42, item 15): each process writes
 * only JSON lines, and the outage is two of them (lost, restored), not a raw
 * `error: connect ECONNREFUSED ... at afterConnect` block per connection and reconnect attempt.
 * The Redis is a private one on a free port; the shared one is never touched.
 */
let env: TestEnv;
let redisPort: number;
let redisDir: string;
let redis: Subprocess | undefined;

function startRedis(): Subprocess {
  return Bun.spawn(["redis-server", ...localRedisArgs(redisPort, redisDir)], {
    stdout: "ignore",
    stderr: "ignore",
  });
}

async function redisAnswers(): Promise<boolean> {
  const probe = Bun.spawn(["redis-cli", "-p", String(redisPort), "ping"], {
    stdout: "pipe",
    stderr: "ignore",
  });
  return (await new Response(probe.stdout).text()).trim() === "PONG";
}

beforeAll(async () => {
  env = await createTestEnv();
  redisPort = await freePort();
  redisDir = mkdtempSync(join(tmpdir(), "outage-logs-"));
  redis = startRedis();
  await eventually(redisAnswers, 10_000);
});
afterAll(async () => {
  redis?.kill("SIGKILL");
  await redis?.exited;
  rmSync(redisDir, { recursive: true, force: true });
  await env.close();
});

/** A process whose stdout and stderr are collected as they come. */
interface Watched {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  stdout: string[];
  stderr: string[];
}

function collect(stream: ReadableStream<Uint8Array>, into: string[]) {
  void (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) into.push(decoder.decode(chunk, { stream: true }));
  })();
}

function spawnAgainstPrivateRedis(command: string[], port: number): Watched {
  const proc = Bun.spawn(command, {
    env: {
      ...process.env,
      NODE_ENV: "development",
      PORT: String(port),
      DATABASE_URL: env.config.databaseUrl,
      REDIS_URL: `redis://127.0.0.1:${redisPort}/0`,
      REDIS_CLUSTER_NODES: "",
      REDIS_PREFIX: env.config.redisPrefix,
      WHATSAPP_GRAPH_URL: "http://127.0.0.1:9",
      LOG_LEVEL: "info",
    },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const watched: Watched = { proc, stdout: [], stderr: [] };
  collect(proc.stdout, watched.stdout);
  collect(proc.stderr, watched.stderr);
  return watched;
}

function lines(chunks: string[]): string[] {
  return chunks
    .join("")
    .split("\n")
    .filter((line) => line.trim() !== "");
}

function parsed(watched: Watched): Record<string, unknown>[] {
  return lines(watched.stdout).map((line) => {
    try {
      return JSON.parse(line) as Record<string, unknown>;
    } catch {
      return { unparsed: line };
    }
  });
}

const messages = (watched: Watched) => parsed(watched).map((line) => line.msg);

test("Redis killed and restarted: only JSON lines, one when it went and one when it came back", async () => {
  const apiPort = await freePort();
  const api = spawnAgainstPrivateRedis(["bun", "src/server.ts"], apiPort);
  const worker = spawnAgainstPrivateRedis(["bun", "workers/send.ts"], 0);
  const processes = { api, worker };
  try {
    await eventually(async () => messages(api).includes("api listening"), 20_000);
    await eventually(async () => messages(worker).includes("consuming"), 20_000);

    redis?.kill("SIGKILL");
    await redis?.exited;
    // Long enough for every connection to fail several reconnect attempts (200 ms, 400 ms, ...).
    await Bun.sleep(4000);
    redis = startRedis();
    await eventually(redisAnswers, 10_000);
    // Each process says Redis is back once its connections are (the assertions below say if not).
    await eventually(
      async () =>
        Object.values(processes).every((w) => messages(w).includes("dependency connection restored")),
      20_000,
    ).catch(() => {});
    await Bun.sleep(500);

    for (const [name, watched] of Object.entries(processes)) {
      expect({ name, stderr: lines(watched.stderr) }).toEqual({ name, stderr: [] });
      expect({ name, unparsed: parsed(watched).filter((line) => "unparsed" in line) }).toEqual({
        name,
        unparsed: [],
      });
      const outage = parsed(watched).filter((line) => /dependency|error/i.test(String(line.msg)));
      expect({ name, outage: outage.map((line) => [line.msg, line.dependency]) }).toEqual({
        name,
        outage: [
          ["dependency connection lost", "redis"],
          ["dependency connection restored", "redis"],
        ],
      });
    }
  } finally {
    for (const watched of Object.values(processes)) watched.proc.kill("SIGKILL");
    await Promise.all(Object.values(processes).map((watched) => watched.proc.exited));
  }
}, 90_000);
