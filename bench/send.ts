/**
 * Send benchmark: wrk against POST /v2/messages of a real api process, next to a baseline (a bare
 * Elysia app validating the same body schema), on this machine. Run by hand; see bench/README.md.
 *
 *   bun bench/send.ts                 # --mode accept: the api alone accepting sends
 *   bun bench/send.ts --mode drain    # + simulator, send and status workers delivering meanwhile
 *   bun bench/send.ts --batch 1000    # POST /v2/messages/batch, 1,000 sends a call (either mode)
 *
 * Everything runs in a database and a Redis prefix of its own (dropped and recreated per run), on
 * loopback, with free ports; every process it starts is stopped at the end, also on failure or
 * Ctrl-C, and a watchdog bounds the whole run.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Queue } from "bullmq";
import { sql } from "kysely";
import { type Config, loadConfig } from "../src/config.ts";
import { createDb, type Db } from "../src/db/connect.ts";
import { migrate } from "../src/db/migrate.ts";
import { createEventPartitions } from "../src/events/partitions.ts";
import { queuePrefix } from "../src/queues/index.ts";
import { createRedis, type RedisClient } from "../src/redis/connect.ts";
import { counterDeltas, readCounters } from "./lib/counters.ts";
import type { CpuGroups } from "./lib/cpu.ts";
import { type DrainSampler, finishDrain, settleAccepted, startDrainSampler } from "./lib/drain.ts";
import { say } from "./lib/format.ts";
import { growDatabase } from "./lib/grow.ts";
import { type Child, guardRun, Launcher } from "./lib/launcher.ts";
import { measureMachineCosts } from "./lib/machine-costs.ts";
import { freePort, waitHttp } from "./lib/net.ts";
import { loadPhase, type PhaseSettings } from "./lib/phase.ts";
import { startProbes } from "./lib/probes.ts";
import { bunCommand, profilesNote } from "./lib/profile.ts";
import { sendOptions } from "./lib/send-options.ts";
import { printReport } from "./lib/send-report.ts";
import { checkSends, serviceEnv, startApis, startWorkers } from "./lib/send-service.ts";
import { createShop } from "./lib/shop.ts";
import { freshStores, PG_BASE, REDIS_URL, removeStores } from "./lib/stores.ts";
import { accessToken } from "./lib/token.ts";
import { startWebhookEndpoint } from "./lib/webhook-lag.ts";
import { describeWrk, requireWrk } from "./lib/wrk.ts";

const ROOT = new URL("..", import.meta.url).pathname;
const opts = sendOptions(process.argv.slice(2));
const WRK = await requireWrk("bench");
const DATABASE_URL = `${PG_BASE}/${opts.database}`;
const RUN_ID = Date.now().toString(36);
const RUN_DIR = join(tmpdir(), `bench-send-${RUN_ID}`);
mkdirSync(RUN_DIR, { recursive: true });

/** Every process the run starts: each one's output in RUN_DIR/<name>.log; all are stopped at the end. */
const launcher = new Launcher(RUN_DIR, ROOT);
const check = () => launcher.check();
const phaseSettings: PhaseSettings = {
  load: {
    wrk: WRK,
    threads: opts.threads,
    connections: opts.connections,
    batch: opts.batch,
    runId: RUN_ID,
  },
  warmup: opts.warmup,
  duration: opts.duration,
  waitQuiet: opts.waitQuiet,
};

let cleanupDone: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleanupDone ??= (async () => {
    // Load generators first, then the simulator (no more webhooks), the api, then the workers.
    await launcher.stopAll(["wrk", "simulator", "api"]);
    if (!opts.keep) {
      await removeStores(DATABASE_URL, opts.redisPrefix, (what, e) =>
        console.error(`bench: ${what} cleanup: ${e}`),
      );
    }
  })();
  return cleanupDone;
}

// The whole run is bounded: setup (a grown database takes about 40 s a million), two wrk phases each
// for the baseline and the api, the drain.
const phaseSeconds = opts.warmup + opts.duration + 15;
const limitSeconds =
  120 +
  Math.ceil(opts.grown * 60) +
  opts.waitQuiet * 2 +
  phaseSeconds * (opts.baseline ? 2 : 1) +
  (opts.mode === "drain" ? opts.drainTimeout + 30 : 0);
const disarm = guardRun("bench", limitSeconds, cleanup);

/** Migrations, the event log's partitions, then --setup-sql and --grown. */
async function prepareDatabase(db: Db, config: Config): Promise<void> {
  await migrate(db);
  // The partitions the maintenance worker keeps ahead of the clock (the bench runs none): events
  // go where they go in service, not into events_default.
  await createEventPartitions(db, new Date(), config.workers.eventPartitionIntervalMs);
  if (opts.setupSql) {
    // Experiments only (a dropped constraint, a setting): never part of a comparable run.
    await sql.raw(readFileSync(opts.setupSql, "utf8")).execute(db);
    say(`applied ${opts.setupSql}`);
  }
  // The other tenants' history, before anything of the run (the samplers read the bench tenant's
  // rows only, so they do not scan it).
  if (opts.grown > 0) {
    // Statements over millions of rows: a connection without the service's 30 s query timeout.
    const filler = createDb(DATABASE_URL, { max: 1, applicationName: "bench", queryTimeoutMs: 3_600_000 });
    await growDatabase(filler, opts.grown, say).finally(() => filler.destroy());
  }
}

/** One tenant with a daily quota of 100,000,000, --apps applications, one sender of the simulator. */
function seed(db: Db, config: Config, simulatorUrl: string) {
  say(`seeding: 1 tenant, ${opts.apps} applications, 1 sender with its templates`);
  return createShop(db, config.providerTokenKey, {
    name: "Bench tenant",
    dailyQuota: 100_000_000,
    apps: { count: opts.apps, name: (i) => `bench app ${i + 1}`, sendLimit: 100_000, readLimit: 100_000 },
    sender: {
      name: "Bench sender",
      phoneNumber: "+15550100001",
      providerPhoneNumberId: "100000000000001",
      wabaId: "200000000000001",
      // A limit above the target: the bench measures our pipeline, not the default 80/s tier.
      mps: 100_000,
      simulatorUrl,
    },
  });
}

/** The same requests against a bare Elysia app validating the same schema (bench/baseline.ts). */
async function runBaseline(
  db: Db,
  env: Record<string, string | undefined>,
  port: number,
  tokensFile: string,
) {
  writeFileSync(tokensFile, "baseline-needs-no-token\n");
  const app = launcher.spawn("baseline", ["bun", "bench/baseline.ts"], env);
  await waitHttp(`http://127.0.0.1:${port}/healthz`, "baseline", { check });
  const baseline = await loadPhase(launcher, phaseSettings, {
    label: "baseline",
    url: `http://127.0.0.1:${port}`,
    tokensFile,
    db,
    groups: { baseline: () => [app.proc.pid] },
    mainPid: app.proc.pid,
  });
  await launcher.stop(app);
  say(`baseline: ${describeWrk(baseline.measured, opts.batch)}`);
  return baseline;
}

/**
 * The api processes, and in drain mode the send and status workers (with --webhook: the endpoint
 * and its worker, issue 22), started and answering.
 */
async function startService(
  db: Db,
  env: Record<string, string | undefined>,
  tenantId: string,
  apiUrl: string,
) {
  const workers: Child[] = opts.mode === "drain" ? startWorkers(launcher, opts, env) : [];
  const webhook =
    opts.mode === "drain" && opts.webhook
      ? await startWebhookEndpoint(db, tenantId, env, opts.receiverMs)
      : undefined;
  if (webhook) {
    const command = bunCommand("workers/webhook.ts", opts.profile ? RUN_DIR : undefined);
    workers.push(launcher.spawn("webhook-worker", command, env));
  }
  const apis = await startApis(launcher, opts, env);
  await waitHttp(`${apiUrl}/readyz`, "api", { check }); // readyz: Postgres and Redis answer it too
  await Bun.sleep(1000); // workers have no health endpoint: one still running after a second is up
  check();
  return { apis, workers, webhook };
}

/** The CPU line's groups of our processes: the api, and in drain mode the workers and the simulator. */
function serviceGroups(apis: Child[], workers: Child[], simulator: Child): CpuGroups {
  const pids = (children: Child[]) => children.map((c) => c.proc.pid);
  const named = (match: (name: string) => boolean) => () => pids(workers.filter((w) => match(w.name)));
  return {
    api: () => pids(apis),
    ...(opts.mode === "drain" && {
      "send workers": named((name) => name.startsWith("send")),
      "status worker": named((name) => name === "status-worker"),
      simulator: () => [simulator.proc.pid],
      ...(workers.some((w) => w.name === "webhook-worker") && {
        "webhook worker": named((name) => name === "webhook-worker"),
      }),
    }),
  };
}

/** During the api's measured run: server counters and drain samples at both ends, pool probes all along. */
function sampleWindow(db: Db, redis: RedisClient, drain: DrainSampler | undefined) {
  return async () => {
    const countersBefore = await readCounters(db, redis);
    const windowStart = await drain?.take();
    const stopProbes = startProbes(db, redis);
    return async () => {
      const countersAfter = await readCounters(db, redis);
      const windowEnd = await drain?.take();
      const probes = await stopProbes();
      return { probes, counters: counterDeltas(countersBefore, countersAfter), windowStart, windowEnd };
    };
  };
}

async function main() {
  const what = opts.batch > 0 ? `, batches of ${opts.batch} (POST /v2/messages/batch)` : "";
  say(`send benchmark, mode ${opts.mode}${what}; logs and results in ${RUN_DIR}`);
  // Before anything of the run is started: the kernel's prices, to compare the CPU figures with
  // (printed with the figures).
  const machine = measureMachineCosts();
  const ports = { api: freePort(), simulator: freePort(), baseline: freePort() };
  const apiUrl = `http://127.0.0.1:${ports.api}`;
  const simulatorUrl = `http://127.0.0.1:${ports.simulator}`;
  const env = serviceEnv(opts, ports, { databaseUrl: DATABASE_URL, redisUrl: REDIS_URL });

  // A fresh database and Redis prefix.
  await freshStores(DATABASE_URL, opts.redisPrefix);
  const db = createDb(DATABASE_URL, { max: 3, applicationName: "bench" });
  const redis = createRedis(REDIS_URL, { connectionName: "bench" });
  const queue = new Queue("send", { connection: redis, prefix: queuePrefix(opts.redisPrefix, "send") });
  try {
    // The services' settings, as they will read them from `env`.
    const config = loadConfig(env);
    await prepareDatabase(db, config);
    // The simulator serves the template sync (and, in drain mode, the sends).
    const simulator = launcher.spawn("simulator", ["bun", "src/simulator/server.ts"], env);
    await waitHttp(`${simulatorUrl}/_sim/health`, "simulator", { check });
    const shop = await seed(db, config, simulatorUrl);
    if (opts.mode === "accept") await launcher.stop(simulator); // nothing is sent in accept mode

    const tokensFile = join(RUN_DIR, "tokens.txt");
    const results: Record<string, unknown> = { options: opts, runDir: RUN_DIR, machine };

    // 1. Baseline.
    const baseline = opts.baseline ? await runBaseline(db, env, ports.baseline, tokensFile) : undefined;
    if (baseline) results.baseline = baseline;

    // 2. The api (and in drain mode the workers), its tokens, one send to check it all works.
    const { apis, workers, webhook } = await startService(db, env, shop.tenantId, apiUrl);
    const tokens: string[] = [];
    for (const app of shop.apps) tokens.push(await accessToken(apiUrl, app, { onRetry: say }));
    writeFileSync(tokensFile, `${tokens.join("\n")}\n`);
    await checkSends(apiUrl, tokens[0]!, RUN_ID, opts.batch);

    // 3. The measured run, with the samplers (drain mode: from its start to the end of the drain).
    const t0 = performance.now();
    const drain =
      opts.mode === "drain"
        ? startDrainSampler(db, queue, t0, shop.tenantId, { api: apiUrl, simulator: simulatorUrl })
        : undefined;
    const api = apis[0]!;
    const phase = await loadPhase(launcher, phaseSettings, {
      label: "api",
      url: apiUrl,
      tokensFile,
      db,
      groups: serviceGroups(apis, workers, simulator),
      mainPid: api.proc.pid,
      during: sampleWindow(db, redis, drain),
    });
    results.api = phase;

    // 4. After the load: drain mode waits (bounded) for the backlog and checks what reached the
    // simulator; accept mode waits for the requests wrk left in flight.
    const window = { start: phase.samples?.windowStart, end: phase.samples?.windowEnd };
    const drained = drain
      ? await finishDrain(drain, db, opts, { t0, tenantId: shop.tenantId, simulatorUrl, window })
      : undefined;
    if (drained) results.drain = drained.results;
    if (webhook) {
      const report = await webhook.finish(opts.drainTimeout * 1000);
      results.webhook = report;
      say(`webhook: ${JSON.stringify(report)}`);
    }
    const accepted = drain ? undefined : await settleAccepted(db, queue, shop.tenantId);
    if (accepted) Object.assign(results, accepted);

    // 5. The figures.
    const ratio = baseline
      ? phase.measured.createdPerSecond / baseline.measured.createdPerSecond
      : Number.NaN;
    results.ratio = ratio;
    const resultsFile = join(RUN_DIR, "results.json");
    writeFileSync(resultsFile, JSON.stringify(results, null, 2));
    const profiled = [
      { name: "api", pid: api.proc.pid },
      ...workers.map((w) => ({ name: w.name, pid: w.proc.pid })),
    ];
    printReport(opts, {
      machine,
      baseline,
      api: phase,
      ratio,
      accepted,
      drain: drained,
      profiles: opts.profile ? profilesNote(RUN_DIR, profiled) : undefined,
      resultsFile,
    });
  } finally {
    await queue.close().catch(() => {});
    redis.disconnect();
    await db.destroy();
  }
}

let exitCode = 0;
try {
  await main();
} catch (error) {
  console.error(`bench: failed: ${error instanceof Error ? error.message : String(error)}`);
  console.error(`bench: logs in ${RUN_DIR}`);
  exitCode = 1;
} finally {
  await cleanup();
  disarm();
}
process.exit(exitCode);
