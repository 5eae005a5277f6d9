/**
 * The service under test of bench/send.ts: its environment, its processes (the workers and N api
 * processes on one port, as `bun run start` starts them), and the sends that check it works before
 * wrk runs.
 */
import { say } from "./format.ts";
import type { Child, Launcher } from "./launcher.ts";
import { bunCommand } from "./profile.ts";
import type { SendOptions } from "./send-options.ts";

/** Every process's environment: loopback, the run's database and prefix, the simulator as provider. */
export function serviceEnv(
  opts: SendOptions,
  ports: { api: number; simulator: number; baseline: number },
  stores: { databaseUrl: string; redisUrl: string },
): Record<string, string | undefined> {
  const apiUrl = `http://127.0.0.1:${ports.api}`;
  const simulatorUrl = `http://127.0.0.1:${ports.simulator}`;
  return {
    ...process.env,
    NODE_ENV: process.env.NODE_ENV || "development",
    PORT: String(ports.api),
    PUBLIC_BASE_URL: `${apiUrl}/v2`,
    DATABASE_URL: stores.databaseUrl,
    REDIS_URL: stores.redisUrl,
    REDIS_PREFIX: opts.redisPrefix,
    LOG_LEVEL: "warn",
    WHATSAPP_GRAPH_URL: simulatorUrl,
    SIMULATOR_PORT: String(ports.simulator),
    SIMULATOR_STATUS_DELAY_MS: String(opts.statusDelayMs),
    // Every send of the run is counted against the simulator's list: it must remember them all.
    SIMULATOR_KEEP_SENDS: "100000000",
    SIMULATOR_WEBHOOK_URL: `${apiUrl}/webhooks/whatsapp`,
    SEND_CONCURRENCY: String(opts.sendConcurrency),
    BASELINE_PORT: String(ports.baseline),
  };
}

/** Drain mode: the send workers and the status worker (--profile: under the profiler). */
export function startWorkers(
  launcher: Launcher,
  opts: SendOptions,
  env: Record<string, string | undefined>,
): Child[] {
  const profileDir = opts.profile ? launcher.runDir : undefined;
  const workers: Child[] = [];
  for (let i = 1; i <= opts.sendWorkers; i++) {
    workers.push(launcher.spawn(`send-worker-${i}`, bunCommand("workers/send.ts", profileDir), env));
  }
  workers.push(launcher.spawn("status-worker", bunCommand("workers/status.ts", profileDir), env));
  return workers;
}

/**
 * --api-processes N: N api processes on one port (as API_PROCESSES=N makes `bun run start` do);
 * each says over IPC when it listens, since the port answering does not say which one did.
 */
export async function startApis(
  launcher: Launcher,
  opts: SendOptions,
  env: Record<string, string | undefined>,
): Promise<Child[]> {
  const apiEnv = { ...env, API_PROCESSES: String(opts.apiProcesses) };
  const profileDir = opts.profile ? launcher.runDir : undefined;
  const listening: Promise<unknown>[] = [];
  const apis = Array.from({ length: opts.apiProcesses }, (_, i) => {
    let listened: (value: unknown) => void = () => {};
    listening.push(new Promise((resolve) => (listened = resolve)));
    return launcher.spawn(
      opts.apiProcesses === 1 ? "api" : `api-${i + 1}`,
      bunCommand(opts.apiEntry, profileDir),
      apiEnv,
      listened,
    );
  });
  const allListening = await Promise.race([
    Promise.all(listening).then(() => true),
    Bun.sleep(30_000).then(() => false),
  ]);
  if (!allListening) say("WARNING: not every api process said within 30 s that it listens");
  return apis;
}

/**
 * One single send that must answer 201; with --batch, one batch of 2 whose rows must read the way
 * wrk's script counts them (`"object":"batch_result","index":N,"status":201`).
 */
export async function checkSends(apiUrl: string, token: string, runId: string, batch: number): Promise<void> {
  const check = await fetch(`${apiUrl}/v2/messages`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      "idempotency-key": `bench-${runId}-check`,
    },
    body: JSON.stringify({
      to: "+4915000000000",
      template: { name: "order_shipped", language: "en", variables: { body: ["Ana", "A-1001"] } },
    }),
  });
  if (check.status !== 201) throw new Error(`a single send answered ${check.status}: ${await check.text()}`);
  if (batch === 0) return;
  // wrk's script counts accepted items by their rows' text: the api must write them that way.
  const checkBatch = await fetch(`${apiUrl}/v2/messages/batch`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({
      messages: [0, 1].map((i) => ({
        to: `+491500000000${i + 1}`,
        template: { name: "order_shipped", language: "en", variables: { body: ["Ana", `A-${i}`] } },
        idempotency_key: `bench-${runId}-check-${i}`,
      })),
    }),
  });
  const text = await checkBatch.text();
  const rows = text.match(/"object":"batch_result","index":\d+,"status":201\b/g)?.length ?? 0;
  if (checkBatch.status !== 200 || rows !== 2)
    throw new Error(
      `a batch of 2 answered ${checkBatch.status} with ${rows} rows as wrk counts them: ${text.slice(0, 500)}`,
    );
}
