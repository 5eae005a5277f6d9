/**
 * bench/send.ts's options: `--help` lists them; bench/README.md explains them. Exits with a message
 * on a bad one.
 */
import { parseArgs } from "node:util";

/** wrk connections with --batch unless --connections says otherwise. */
const BATCH_CONNECTIONS = 8;
const BATCH_MAX = 1000;

export function fatal(message: string): never {
  console.error(`bench: ${message}`);
  process.exit(1);
}

export function sendOptions(args: string[]) {
  const { values: flags } = parseArgs({
    args,
    strict: true,
    options: {
      mode: { type: "string", default: "accept" },
      duration: { type: "string", default: "20" },
      warmup: { type: "string", default: "5" },
      // 64, or BATCH_CONNECTIONS with --batch: more concurrent 1,000-item batches only queue.
      connections: { type: "string" },
      batch: { type: "string", default: "0" },
      threads: { type: "string", default: "2" },
      apps: { type: "string", default: "50" },
      // As `bun run start` runs the service (SEND_WORKERS defaults to 1, src/config.ts).
      "send-workers": { type: "string", default: "1" },
      "send-concurrency": { type: "string", default: "20" },
      "status-delay-ms": { type: "string", default: "20" },
      "drain-timeout": { type: "string", default: "60" },
      database: { type: "string", default: "bench_send" },
      "redis-prefix": { type: "string", default: "bench-send" },
      "no-baseline": { type: "boolean", default: false },
      profile: { type: "boolean", default: false },
      keep: { type: "boolean", default: false },
      "wait-quiet": { type: "string", default: "0" },
      "api-entry": { type: "string", default: "src/server.ts" },
      "api-processes": { type: "string", default: "1" },
      "setup-sql": { type: "string" },
      grown: { type: "string", default: "0" },
      webhook: { type: "boolean", default: false },
      "receiver-ms": { type: "string", default: "50" },
      help: { type: "boolean", short: "h", default: false },
    },
  });

  if (flags.help) {
    console.log(`bun bench/send.ts [--mode accept|drain] [options]   (see bench/README.md)
  --duration S          measured wrk run, seconds (20)
  --warmup S            wrk warm-up before it, seconds (5)
  --connections N       wrk connections (64; ${BATCH_CONNECTIONS} with --batch)
  --batch N             POST /v2/messages/batch with N sends a call (1-1000), counting accepted items;
                        no baseline then (it serves single sends only)
  --threads N           wrk threads (2)
  --apps N              applications whose tokens the requests rotate over (50)
  --send-workers N      drain: send worker processes (1, the service's default)
  --send-concurrency N  drain: SEND_CONCURRENCY of each send worker (20)
  --status-delay-ms MS  drain: simulator delay before each status webhook (20)
  --drain-timeout S     drain: how long to wait for the backlog after wrk stops (60)
  --database NAME       dedicated database, dropped and recreated (bench_send)
  --redis-prefix P      dedicated REDIS_PREFIX, its keys deleted before and after (bench-send)
  --no-baseline         skip the baseline (no ratio then)
  --profile             run the api and workers under bun --cpu-prof --cpu-prof-md (profiles in the run directory)
  --keep                keep the database and Redis keys afterwards
  --wait-quiet S        before each phase, wait up to S s for other processes to leave the CPUs idle (0)
  --api-entry FILE      the api's entrypoint, to try a variant of it (src/server.ts)
  --api-processes N     api processes sharing the port (API_PROCESSES, SO_REUSEPORT) (1)
  --setup-sql FILE      SQL run in the benchmark's database after the migrations (experiments)
  --grown N             first fill N million messages of other tenants (their contacts, conversations,
                        feed entries, idempotency records; bench/lib/grow.ts), then measure (0)
  --webhook             drain: a webhook endpoint subscribed to every event, its receiver here answering
                        after --receiver-ms (50), a webhook worker delivering; prints the delivery lag`);
    process.exit(0);
  }

  function int(name: keyof typeof flags, min: number, fallback?: number): number {
    const raw = String(flags[name] ?? fallback);
    if (!/^\d+$/.test(raw) || Number(raw) < min) fatal(`--${name} must be an integer of at least ${min}`);
    return Number(raw);
  }

  const mode = flags.mode;
  if (mode !== "accept" && mode !== "drain") fatal("--mode is accept or drain");
  const batch = int("batch", 0);
  if (batch > BATCH_MAX) fatal(`--batch is at most ${BATCH_MAX}`);
  const opts = {
    mode,
    /** Sends per POST /v2/messages/batch; 0: single sends (POST /v2/messages). */
    batch,
    duration: int("duration", 1),
    warmup: int("warmup", 0),
    connections: int("connections", 1, batch > 0 ? BATCH_CONNECTIONS : 64),
    threads: int("threads", 1),
    apps: int("apps", 1),
    sendWorkers: int("send-workers", 1),
    sendConcurrency: int("send-concurrency", 1),
    statusDelayMs: int("status-delay-ms", 0),
    drainTimeout: int("drain-timeout", 0),
    database: String(flags.database),
    redisPrefix: String(flags["redis-prefix"]),
    // The baseline serves single sends only: no ratio in batch mode.
    baseline: !flags["no-baseline"] && batch === 0,
    profile: Boolean(flags.profile),
    keep: Boolean(flags.keep),
    waitQuiet: int("wait-quiet", 0),
    apiEntry: String(flags["api-entry"]),
    apiProcesses: int("api-processes", 1),
    setupSql: flags["setup-sql"],
    /** Millions of other tenants' messages in the database before the run. */
    grown: Number(flags.grown),
    webhook: Boolean(flags.webhook),
    receiverMs: int("receiver-ms", 0),
  };
  if (!Number.isFinite(opts.grown) || opts.grown < 0 || opts.grown > 100)
    fatal("--grown is 0 to 100 (millions)");
  // Never the dev or a test database: only names that say they are the benchmark's.
  if (!/^bench[a-z0-9_]*$/.test(opts.database)) fatal("--database must start with 'bench' (a-z 0-9 _)");
  if (!/^bench[A-Za-z0-9_.-]*$/.test(opts.redisPrefix)) fatal("--redis-prefix must start with 'bench'");
  return opts;
}

export type SendOptions = ReturnType<typeof sendOptions>;
