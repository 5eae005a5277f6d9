/**
 * Fault suite (issue 12): the api, the workers and the simulator as separate processes, against a
 * private Postgres cluster and a private Redis that this script starts, kills and restarts, while
 * 24 clients send. Every scenario must end with no duplicate send, no loss, no 500, no process
 * dead by itself and no message short of `read`. Every shop has a webhook endpoint subscribed to
 * every event (issue 22), its receiver in this process: every event of the log must reach it, each
 * contact's events first arriving in log order. Run by hand, and from CI with a small --n.
 *
 *   bun bench/faults.ts               # every scenario, 2,000 sends each
 *   bun bench/faults.ts --n 300       # CI's size
 *   bun bench/faults.ts --only baseline,postgres-5s
 *   bun bench/faults.ts --redis-cluster  # the failovers: a Redis Cluster of 3 masters + 3 replicas
 *
 * Never touches the shared servers: initdb makes a cluster in a temporary folder (as an
 * unprivileged user when run as root: initdb refuses root), on a free port; redis-server runs on
 * another free port with no persistence. Everything is stopped and removed at the end, also on
 * failure or Ctrl-C; the logs stay when a scenario failed (their folder is printed).
 */
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { Subprocess } from "bun";
import { sql } from "kysely";
import { findPgTools, freePort, privatePostgres } from "../scripts/private-postgres.ts";
import { type LocalCluster, startRedisCluster } from "../scripts/redis-cluster.ts";
import { localRedisArgs } from "../scripts/services.ts";
import { loadConfig } from "../src/config.ts";
import { createDb, type Db, ensureDatabase } from "../src/db/connect.ts";
import { migrate } from "../src/db/migrate.ts";
import { createEventPartitions, dropExpiredEventPartitions } from "../src/events/partitions.ts";
import { inPool } from "../src/outbound/pacing.ts";
import { queuePrefix } from "../src/queues/index.ts";
import { createRedis } from "../src/redis/connect.ts";
import { bsuidForPhone } from "../src/simulator/users.ts";
import { describeEndpointBacklog, markLogs, newWarnings } from "./lib/fault-diagnostics.ts";
import { waitHttp } from "./lib/net.ts";
import { createShop } from "./lib/shop.ts";
import { accessToken } from "./lib/token.ts";

const ROOT = new URL("..", import.meta.url).pathname;

// ---------------------------------------------------------------------------------------------
// Options

const SCENARIOS = [
  "baseline",
  "send-worker-kill",
  "status-worker-kill",
  "redis-restart",
  "postgres-5s",
  "postgres-30s",
  "flushall-replay",
  "inbound-finalize-kill",
  "webhook-worker-kill",
  "receiver-down-60s",
  "event-partitions",
  "scheduled-redis-kill",
  "identity-redis-restart",
  "failover-queue-master",
  "failover-tenant-master",
] as const;
type ScenarioName = (typeof SCENARIOS)[number];
/** Scenarios on a Redis Cluster (`--redis-cluster`): a master is killed and its replica promoted. */
const FAILOVER_SCENARIOS: readonly ScenarioName[] = ["failover-queue-master", "failover-tenant-master"];

const { values: flags } = parseArgs({
  args: process.argv.slice(2),
  strict: true,
  options: {
    n: { type: "string", default: "2000" },
    clients: { type: "string", default: "24" },
    only: { type: "string" },
    "status-delay-ms": { type: "string", default: "100" },
    "settle-timeout": { type: "string", default: "150" },
    keep: { type: "boolean", default: false },
    "redis-cluster": { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
});

if (flags.help) {
  console.log(`bun bench/faults.ts [options]
  --n N                 sends per scenario (2000); the FLUSHALL replay uses min(N, 200)
  --clients N           concurrent clients (24); each retries 5xx/429/409 with its Idempotency-Key
  --only A,B            run only these scenarios: ${SCENARIOS.join(", ")}
  --redis-cluster       a Redis Cluster of 3 masters + 3 replicas (cluster-node-timeout 3 s) instead of
                        one redis-server; runs the failover scenarios (${FAILOVER_SCENARIOS.join(", ")})
  --status-delay-ms MS  simulator delay before each status webhook (100)
  --settle-timeout S    how long messages may take to reach read after the load (150)
  --keep                keep the temporary folder (cluster, logs) even when everything passed`);
  process.exit(0);
}

function int(name: "n" | "clients" | "status-delay-ms" | "settle-timeout", min: number): number {
  const raw = String(flags[name]);
  if (!/^\d+$/.test(raw) || Number(raw) < min) fatal(`--${name} must be an integer of at least ${min}`);
  return Number(raw);
}

function fatal(message: string): never {
  console.error(`faults: ${message}`);
  process.exit(1);
}

const opts = {
  n: int("n", 10),
  clients: int("clients", 1),
  statusDelayMs: int("status-delay-ms", 0),
  settleTimeoutMs: int("settle-timeout", 10) * 1000,
  keep: Boolean(flags.keep),
  cluster: Boolean(flags["redis-cluster"]),
  only: flags.only
    ? flags.only.split(",").map((s) => s.trim())
    : SCENARIOS.filter((name) => FAILOVER_SCENARIOS.includes(name) === Boolean(flags["redis-cluster"])),
};
for (const name of opts.only) {
  if (!(SCENARIOS as readonly string[]).includes(name)) fatal(`unknown scenario ${name}`);
  // One Redis server's scenarios (a restart, FLUSHALL) and a Cluster's failovers do not mix.
  if (FAILOVER_SCENARIOS.includes(name as ScenarioName) !== opts.cluster)
    fatal(`${name} runs ${opts.cluster ? "without" : "with"} --redis-cluster`);
}

const pgTools = (() => {
  const found = findPgTools();
  if ("problem" in found) fatal(found.problem);
  return found;
})();
if (!Bun.which("redis-server")) fatal("redis-server is not installed");

const RUN_DIR = mkdtempSync(join(tmpdir(), "faults-"));
const LOG_DIR = join(RUN_DIR, "logs");
mkdirSync(LOG_DIR);

// ---------------------------------------------------------------------------------------------
// Helpers

const started = Date.now();
function say(message: string) {
  console.log(`${((Date.now() - started) / 1000).toFixed(0).padStart(5)}s ${message}`);
}

async function until<T>(
  what: string,
  timeoutMs: number,
  check: () => Promise<T | undefined | false>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await Bun.sleep(200);
  }
}

// ---------------------------------------------------------------------------------------------
// The private Postgres cluster (scripts/private-postgres.ts).

const ports = { pg: freePort(), redis: freePort(), api: freePort(), simulator: freePort() };
const postgres = privatePostgres({
  tools: pgTools,
  home: join(RUN_DIR, "pg"),
  port: ports.pg,
  commandLog: join(LOG_DIR, "commands.log"),
  settings: [
    "max_connections=300",
    // Clean stops only (pg_ctl stop -m fast): what is committed survives them without fsync.
    "fsync=off",
    "full_page_writes=off",
  ],
});
const DATABASE_URL = postgres.url("faults");
const REDIS_URL = `redis://127.0.0.1:${ports.redis}/0`;
const REDIS_PREFIX = "faults";
/** With --redis-cluster: the Cluster (scripts/redis-cluster.ts), started by main(). */
let redisCluster: LocalCluster | undefined;

// ---------------------------------------------------------------------------------------------
// Child processes: each one's output goes to LOG_DIR/<name>.log.

interface Child {
  name: string;
  cmd: string[];
  proc: Subprocess;
  /** An exit nobody asked for is a process that died of a fault. */
  expectedExit: boolean;
}

const children = new Map<string, Child>();
/** Processes that exited by themselves, in order. */
const deaths: { name: string; code: number | null; at: number }[] = [];
let stopping = false;

const childEnv: Record<string, string | undefined> = {
  ...process.env,
  NODE_ENV: "development",
  PORT: String(ports.api),
  PUBLIC_BASE_URL: `http://127.0.0.1:${ports.api}/v2`,
  DATABASE_URL,
  REDIS_URL,
  REDIS_PREFIX,
  LOG_LEVEL: "warn",
  WHATSAPP_GRAPH_URL: `http://127.0.0.1:${ports.simulator}`,
  SIMULATOR_PORT: String(ports.simulator),
  SIMULATOR_STATUS_DELAY_MS: String(opts.statusDelayMs),
  // Every send of the run is counted against the simulator's list: it must remember them all.
  SIMULATOR_KEEP_SENDS: "100000000",
  SIMULATOR_WEBHOOK_URL: `http://127.0.0.1:${ports.api}/webhooks/whatsapp`,
  // Lost jobs are found again within seconds, and a killed worker's jobs come back quickly.
  SWEEP_INTERVAL_MS: "2000",
  SWEEP_GRACE_SECONDS: "5",
  WORKER_LOCK_MS: "5000",
  WORKER_STALLED_INTERVAL_MS: "2000",
  SEND_RETRY_BASE_MS: "500",
  // A send whose outcome is unknown (its worker killed mid-call) is resent only after this long
  // without an echo; the echo comes within a second here.
  SEND_IN_DOUBT_MS: "20000",
  // Webhook retries from 1 s (doubling): a receiver back after 60 s is retried within a minute.
  WEBHOOK_RETRY_BASE_MS: "1000",
  // The event log's partitions a minute wide, created by the maintenance worker every 5 s pass:
  // partitions are attached all through the run (and rolled on purpose in event-partitions).
  EVENT_PARTITION_INTERVAL_MS: "60000",
  RETENTION_INTERVAL_MS: "5000",
};

function spawnChild(name: string, cmd: string[]): Child {
  const log = openSync(join(LOG_DIR, `${name}.log`), "a");
  const proc = Bun.spawn(cmd, { cwd: ROOT, env: childEnv, stdin: "ignore", stdout: log, stderr: log });
  closeSync(log);
  const child: Child = { name, cmd, proc, expectedExit: false };
  children.set(name, child);
  void proc.exited.then((code) => {
    if (!child.expectedExit && !stopping) {
      deaths.push({ name, code, at: Date.now() });
      say(`!! ${name} exited by itself (code ${code}); see ${LOG_DIR}/${name}.log`);
    }
  });
  return child;
}

async function stopChild(child: Child, signal: "SIGTERM" | "SIGKILL" = "SIGTERM"): Promise<void> {
  child.expectedExit = true;
  if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill(signal);
  const done = await Promise.race([child.proc.exited.then(() => true), Bun.sleep(15_000).then(() => false)]);
  if (!done) {
    child.proc.kill("SIGKILL");
    await child.proc.exited;
  }
}

function respawn(name: string): Child {
  const old = children.get(name);
  if (!old) throw new Error(`no process ${name}`);
  return spawnChild(name, old.cmd);
}

const alive = (child: Child | undefined) =>
  child !== undefined && child.proc.exitCode === null && child.proc.signalCode === null;

/** Any process found dead (by itself) is started again, so the next scenario has a full set. */
function reviveTheDead(): void {
  for (const child of children.values()) if (!alive(child) && !child.expectedExit) respawn(child.name);
}

function startRedis(): Child {
  return spawnChild("redis", ["redis-server", ...localRedisArgs(ports.redis, RUN_DIR)]);
}

/** Where this run's Redis is: the one server, or the Cluster. */
const redisTarget = () => (redisCluster ? loadConfig(childEnv) : REDIS_URL);

async function waitRedis(): Promise<void> {
  const probe = createRedis(redisTarget());
  try {
    await until("redis answers", 20_000, async () => (await probe.ping()) === "PONG");
  } finally {
    probe.disconnect();
  }
}

let cleanupDone: Promise<void> | undefined;
function cleanup(keepFolder: boolean): Promise<void> {
  cleanupDone ??= (async () => {
    stopping = true;
    const order = ["simulator", "api"];
    const all = [...children.values()];
    for (const name of order) {
      const child = children.get(name);
      if (child) await stopChild(child);
    }
    await Promise.all(
      all.filter((c) => !order.includes(c.name) && c.name !== "redis").map((c) => stopChild(c)),
    );
    const redis = children.get("redis");
    if (redis) await stopChild(redis, "SIGKILL");
    await redisCluster?.stop();
    if (postgres.running) await postgres.stop("immediate").catch((e) => console.error(`faults: ${e}`));
    if (keepFolder) console.log(`faults: cluster and logs kept in ${RUN_DIR}`);
    else rmSync(RUN_DIR, { recursive: true, force: true });
  })();
  return cleanupDone;
}

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    console.error(`faults: ${signal}, stopping everything`);
    void cleanup(true).then(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// Seeding: every scenario has a tenant and a sender (phone number id) of its own, so its rows and
// the provider's sends are counted apart.

interface Shop {
  tenantId: string;
  /** The endpoint its receiver is subscribed with. */
  endpointId: string;
  token: string;
  phoneNumberId: string;
  /** The shop's webhook receiver (an endpoint subscribed to every event posts to it). */
  receiver: Receiver;
}

/**
 * A webhook receiver: acknowledges every post (204) and records each event id as it arrives, in
 * arrival order; `down` makes it unreachable (its port closed) until `up`.
 */
interface Receiver {
  url: string;
  arrivals: string[];
  /** Each event's contact as the post named it (`data.contact`, or a merge's survivor). */
  contactOf: Map<string, string>;
  down(): Promise<void>;
  up(): void;
  stop(): Promise<void>;
}

function startReceiver(): Receiver {
  const arrivals: string[] = [];
  const contactOf = new Map<string, string>();
  const handle = async (request: Request) => {
    const id = request.headers.get("webhook-id") ?? "";
    const event = JSON.parse(await request.text()) as {
      data?: { contact?: { id?: string }; survivor?: { id?: string } };
    };
    const contact = event.data?.contact?.id ?? event.data?.survivor?.id;
    if (contact && !contactOf.has(id)) contactOf.set(id, contact);
    arrivals.push(id);
    return new Response(null, { status: 204 });
  };
  let server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: handle });
  const port = server.port;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    arrivals,
    contactOf,
    down: () => server.stop(true),
    up() {
      server = Bun.serve({ port, hostname: "127.0.0.1", fetch: handle });
    },
    stop: () => server.stop(true),
  };
}

/** The shop of the scenario running now: its webhook figures are measured after the scenario. */
let currentShop: Shop | undefined;

const apiUrl = `http://127.0.0.1:${ports.api}`;
const simulatorUrl = `http://127.0.0.1:${ports.simulator}`;

async function openShop(db: Db, index: number, options: { mps?: number } = {}): Promise<Shop> {
  const phoneNumberId = `10900000000${String(index).padStart(4, "0")}`;
  const { tenantId, apps } = await createShop(db, loadConfig(childEnv).providerTokenKey, {
    name: `Faults ${index}`,
    dailyQuota: 100_000_000,
    apps: { name: "faults", sendLimit: 100_000, readLimit: 100_000 },
    sender: {
      phoneNumber: `+1555010${String(index).padStart(4, "0")}`,
      providerPhoneNumberId: phoneNumberId,
      wabaId: "209000000000001",
      ...(options.mps !== undefined && { mps: options.mps }),
      simulatorUrl,
    },
  });
  const token = await accessToken(apiUrl, apps[0]!, { maxAttempts: 30 });
  const receiver = startReceiver();
  const endpoint = await fetch(`${apiUrl}/v2/webhook_endpoints`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: JSON.stringify({ url: receiver.url }),
  });
  if (endpoint.status !== 201)
    throw new Error(`webhook endpoint: ${endpoint.status} ${await endpoint.text()}`);
  const { id: endpointId } = (await endpoint.json()) as { id: string };
  currentShop = { tenantId, endpointId, token, phoneNumberId, receiver };
  return currentShop;
}

// ---------------------------------------------------------------------------------------------
// Load: clients that retry a refused request with the same key, honouring Retry-After.

interface Tally {
  /** HTTP statuses of every answer (and `conn`/`timeout` for none), over all attempts. */
  statuses: Map<string, number>;
  /** Logical request -> the message id it was finally answered with. */
  ids: Map<number, string>;
  /** Logical requests answered 201 (a new message), and 200 (a replay). */
  created: number;
  replayed: number;
  /** The load stopped finishing requests (see load). */
  stalled: boolean;
  /** Logical requests refused for good (a 4xx that is not retried) or given up after the deadline. */
  refused: number;
  gaveUp: number;
  /** When each successful answer came (for the time to recover). */
  okAt: number[];
}

const newTally = (): Tally => ({
  statuses: new Map(),
  ids: new Map(),
  created: 0,
  replayed: 0,
  refused: 0,
  gaveUp: 0,
  stalled: false,
  okAt: [],
});

const REQUEST_DEADLINE_MS = 120_000;
const LOAD_STALL_MS = 90_000;

/** One logical request, retried until it is answered 2xx, refused for good, or the deadline passes. */
async function attempt(
  tally: Tally,
  index: number,
  request: () => Promise<Response>,
  onOk: (response: Response) => Promise<string>,
): Promise<void> {
  const deadline = Date.now() + REQUEST_DEADLINE_MS;
  for (;;) {
    let label: string;
    let waitMs = 500;
    try {
      const response = await request();
      label = String(response.status);
      if (response.ok) {
        tally.statuses.set(label, (tally.statuses.get(label) ?? 0) + 1);
        tally.ids.set(index, await onOk(response));
        if (response.status === 201) tally.created++;
        else tally.replayed++;
        tally.okAt.push(Date.now());
        return;
      }
      await response.arrayBuffer();
      const retryAfter = Number(response.headers.get("retry-after"));
      if (retryAfter > 0) waitMs = Math.min(retryAfter, 30) * 1000;
      if (response.status < 500 && response.status !== 429 && response.status !== 409) {
        tally.statuses.set(label, (tally.statuses.get(label) ?? 0) + 1);
        tally.refused++;
        return;
      }
    } catch (error) {
      label = (error as Error).name === "TimeoutError" ? "timeout" : "conn";
    }
    tally.statuses.set(label, (tally.statuses.get(label) ?? 0) + 1);
    if (Date.now() > deadline) {
      tally.gaveUp++;
      return;
    }
    await Bun.sleep(waitMs);
  }
}

function sendRequest(shop: Shop, scenario: number, index: number) {
  const body = JSON.stringify({
    to: `+49151${scenario}${String(index).padStart(7, "0")}`,
    template: { name: "order_shipped", language: "en", variables: { body: ["Ada", `#${index}`] } },
  });
  return () =>
    fetch(`${apiUrl}/v2/messages`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${shop.token}`,
        "content-type": "application/json",
        "idempotency-key": `faults-${scenario}-${index}`,
      },
      body,
      signal: AbortSignal.timeout(20_000),
    });
}

const messageIdOf = async (response: Response) => ((await response.json()) as { id: string }).id;

/** Runs `count` logical requests over the clients; `fault` starts once `faultAt` of them are done. */
async function load(
  count: number,
  one: (tally: Tally, index: number) => Promise<void>,
  fault?: { at: number; run: () => Promise<number> },
): Promise<{ tally: Tally; faultEnd: Promise<number | undefined> }> {
  const tally = newTally();
  let next = 0;
  let done = 0;
  let faultRun: Promise<number | undefined> = Promise.resolve(undefined);
  let faultStarted = false;
  const startFault = () => {
    if (faultStarted || !fault) return;
    faultStarted = true;
    faultRun = fault.run().catch((error) => {
      say(`!! fault step failed: ${(error as Error).message}`);
      return undefined;
    });
  };
  if (fault && fault.at <= 0) startFault();
  // No request finished for this long (the 30 s outage included) is a hang: the scenario fails
  // instead of waiting out every request's deadline.
  let lastDoneAt = Date.now();
  let onStall: () => void = () => {};
  const stall = new Promise<"stalled">((resolve) => {
    onStall = () => resolve("stalled");
  });
  const progress = setInterval(() => {
    say(`   ${done}/${count} answered; ${describeStatuses(tally.statuses)}`);
    if (Date.now() - lastDoneAt > LOAD_STALL_MS) onStall();
  }, 10_000);
  const clients = Promise.all(
    Array.from({ length: opts.clients }, async () => {
      while (next < count && !tally.stalled) {
        const index = next++;
        await one(tally, index);
        done++;
        lastDoneAt = Date.now();
        if (fault && done >= fault.at * count) startFault();
      }
    }),
  );
  if ((await Promise.race([clients, stall])) === "stalled") {
    tally.stalled = true;
    const ready = await fetch(`${apiUrl}/readyz`, { signal: AbortSignal.timeout(3000) }).then(
      async (r) => `${r.status} ${await r.text()}`,
      (e: Error) => e.message,
    );
    say(`!! no request finished for ${LOAD_STALL_MS / 1000} s; api /readyz: ${ready}`);
  }
  clearInterval(progress);
  startFault();
  return { tally, faultEnd: faultRun };
}

// ---------------------------------------------------------------------------------------------
// Faults. Each resolves with the moment the fault ended (the process or server is back).

async function killAndRestart(name: string): Promise<number> {
  const child = children.get(name);
  if (!child) throw new Error(`no process ${name}`);
  say(`   kill -9 ${name}`);
  await stopChild(child, "SIGKILL");
  await Bun.sleep(2000);
  respawn(name);
  say(`   ${name} started again`);
  return Date.now();
}

async function restartRedisEmpty(): Promise<number> {
  const redis = children.get("redis");
  if (!redis) throw new Error("no redis");
  say("   kill -9 redis-server");
  await stopChild(redis, "SIGKILL");
  await Bun.sleep(3000);
  startRedis();
  await waitRedis();
  say("   redis-server started again, empty");
  return Date.now();
}

async function stopPostgresFor(seconds: number): Promise<number> {
  say(`   pg_ctl stop -m fast (for ${seconds} s)`);
  await postgres.stop("fast");
  await Bun.sleep(seconds * 1000);
  await postgres.start();
  say("   postgres started again");
  return Date.now();
}

/**
 * The event log's partitions roll under load: ten minutes of partitions are attached ahead, and a
 * partition older than every tenant's bound is made and dropped (its DDL takes the whole log's lock
 * while the sequencer writes events and the webhook worker reads them). A lock not had within its
 * timeout is tried again, as the maintenance worker's next pass would.
 */
async function rollEventPartitions(db: Db): Promise<number> {
  const minute = 60_000;
  for (let attempt = 1; ; attempt++) {
    try {
      const now = Date.now();
      const created = await createEventPartitions(db, new Date(now), minute, 10);
      const [old] = await createEventPartitions(db, new Date(now - 40 * 86_400_000), minute, 1);
      const dropped = await dropExpiredEventPartitions(db, new Date(now));
      if (!old || !dropped.includes(old)) throw new Error(`partition ${old} was not dropped`);
      say(
        `   event partitions: ${created.length} attached ahead, ${dropped.length} dropped (attempt ${attempt})`,
      );
      return Date.now();
    } catch (error) {
      if (attempt >= 5) throw error;
      say(`   event partitions: ${(error as Error).message}; again`);
      await Bun.sleep(1000);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Measuring

interface Row {
  scenario: ScenarioName;
  n: number;
  accepted: number;
  rows: number;
  sends: number | undefined;
  duplicates: number;
  lost: number;
  notRead: number;
  statuses: Map<string, number>;
  unanswered: number;
  stalled: boolean;
  died: string[];
  recoverMs: number | undefined;
  settleMs: number | undefined;
  notes: string[];
  /** The shop's events, those its receiver never got, contacts whose events first came out of order. */
  webhook?: {
    events: number;
    lost: number;
    outOfOrder: number;
    duplicates: number;
    settleMs: number | undefined;
  };
  /** identity-redis-restart: people and their contacts at the end (DESIGN §14). */
  identity?: {
    persons: number;
    /** People found as more than one live contact, or as none. */
    split: number;
    /** Messages left on a contact that was merged into another. */
    onMerged: number;
    merged: number;
  };
  /** scheduled-redis-kill: cancels answered 200, and what must never happen to sends (DESIGN §13). */
  scheduled?: {
    canceled: number;
    /** Canceled with a 200, yet received by the provider. */
    sentAfterCancel: number;
    expired: number;
    /** Received by the provider past send_at + valid_for, or failed `expired` and received anyway. */
    sentLate: number;
    /** Failed for a reason other than `expired` (the simulator fails nothing here). */
    failedOtherwise: number;
  };
}

/**
 * The provider's sends of one sender per our message id (biz_opaque_callback_data): when each one
 * reached the simulator (epoch ms of its received_at), in arrival order.
 */
async function providerReceipts(phoneNumberId: string): Promise<Map<string, number[]>> {
  const response = await fetch(`${simulatorUrl}/_sim/sent?phone_number_id=${phoneNumberId}`);
  const sent = (await response.json()) as {
    data: { received_at: string; payload: { biz_opaque_callback_data?: string } }[];
  };
  const perMessage = new Map<string, number[]>();
  for (const record of sent.data) {
    const id = record.payload.biz_opaque_callback_data ?? "(none)";
    const receipts = perMessage.get(id);
    if (receipts) receipts.push(Date.parse(record.received_at));
    else perMessage.set(id, [Date.parse(record.received_at)]);
  }
  return perMessage;
}

/** The provider's sends of one sender, counted per our message id. */
async function providerSends(phoneNumberId: string): Promise<Map<string, number>> {
  const receipts = await providerReceipts(phoneNumberId);
  return new Map([...receipts].map(([id, times]) => [id, times.length]));
}

async function outboundRows(db: Db, tenantId: string) {
  return db
    .selectFrom("messages")
    .select(["id", "status"])
    .where("tenant_id", "=", tenantId)
    .where("direction", "=", "outbound")
    .execute();
}

/** Waits until every message of the shop is `read` (or the settle timeout); the time it took. */
async function settleOutbound(db: Db, shop: Shop, expected: number): Promise<number | undefined> {
  const from = Date.now();
  const deadline = from + opts.settleTimeoutMs;
  while (Date.now() < deadline) {
    const rows = await outboundRows(db, shop.tenantId).catch(() => undefined);
    if (rows && rows.length >= expected && rows.every((r) => r.status === "read")) return Date.now() - from;
    await Bun.sleep(1000);
  }
  return undefined;
}

function recoverMs(tally: Tally, faultEnd: number | undefined): number | undefined {
  if (faultEnd === undefined) return undefined;
  const first = tally.okAt.filter((t) => t >= faultEnd).sort((a, b) => a - b)[0];
  return first === undefined ? undefined : Math.max(0, first - faultEnd);
}

/** A row's figures that come from the load alone: its answers, and the processes that died meanwhile. */
function loadFigures(tally: Tally, deathsBefore: number) {
  return {
    /** Distinct message ids the load was answered with (201, or 200 for a replay). */
    accepted: new Set(tally.ids.values()).size,
    statuses: tally.statuses,
    unanswered: tally.gaveUp + tally.refused,
    died: deaths.slice(deathsBefore).map((d) => d.name),
  };
}

/** Repeats beyond the first, over the times each thing was seen. */
function repeats(counts: Iterable<number>): number {
  let extra = 0;
  for (const count of counts) extra += Math.max(0, count - 1);
  return extra;
}

async function measureOutbound(
  db: Db,
  scenario: ScenarioName,
  shop: Shop,
  n: number,
  tally: Tally,
  faultEnd: number | undefined,
  deathsBefore: number,
): Promise<Row> {
  const settleMs = await settleOutbound(db, shop, tally.ids.size);
  // Late duplicates would come after the in-doubt wait: give them the chance to show.
  const rows = await outboundRows(db, shop.tenantId);
  const sends = await providerSends(shop.phoneNumberId);
  const rowIds = new Set(rows.map((r) => r.id ?? ""));
  const acknowledged = new Set(tally.ids.values());
  const lost =
    [...acknowledged].filter((id) => !rowIds.has(id)).length +
    rows.filter((r) => !sends.has(r.id ?? "")).length;
  return {
    scenario,
    n,
    ...loadFigures(tally, deathsBefore),
    rows: rows.length,
    sends: [...sends.values()].reduce((a, b) => a + b, 0),
    duplicates: repeats(sends.values()),
    lost,
    notRead: rows.filter((r) => r.status !== "read").length,
    stalled: tally.stalled,
    recoverMs: recoverMs(tally, faultEnd),
    settleMs,
    notes: [],
  };
}

// ---------------------------------------------------------------------------------------------
// Scenarios

async function outboundScenario(
  db: Db,
  scenario: ScenarioName,
  index: number,
  fault?: (shop: Shop) => Promise<number>,
): Promise<Row> {
  const shop = await openShop(db, index);
  const deathsBefore = deaths.length;
  const n = opts.n;
  const { tally, faultEnd } = await load(
    n,
    (t, i) => attempt(t, i, sendRequest(shop, index, i), messageIdOf),
    fault && { at: 0.3, run: () => fault(shop) },
  );
  return measureOutbound(db, scenario, shop, n, tally, await faultEnd, deathsBefore);
}

/** How long a failover may keep sends or deliveries from going on, counted from the promotion. */
const FAILOVER_RECOVERY_MS = 10_000;
/** How long a process may take to stop after a failover (SIGTERM to exit). */
const STOP_AFTER_FAILOVER_MS = 10_000;

async function deliveredCount(db: Db, shop: Shop): Promise<number> {
  const row = await db
    .selectFrom("messages")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("tenant_id", "=", shop.tenantId)
    .where("provider_message_id", "is not", null)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * The master serving the slot of `keyOf(shop)` is killed (kill -9, not restarted) once 35% of the
 * sends are answered; the cluster promotes its replica. Sends must be accepted again and deliveries
 * flow within FAILOVER_RECOVERY_MS of the promotion, and a worker must stop as quickly as ever. The
 * dead node is started again afterwards (it rejoins as the new master's replica), so the next
 * scenario's master has a replica too.
 */
async function failoverScenario(
  db: Db,
  scenario: ScenarioName,
  index: number,
  keyOf: (shop: Shop) => string,
): Promise<Row> {
  const cluster = redisCluster;
  if (!cluster) throw new Error(`${scenario} needs --redis-cluster`);
  const shop = await openShop(db, index);
  const key = keyOf(shop);
  const deathsBefore = deaths.length;
  let killed: number | undefined;
  let deliveriesResumed: Promise<number | undefined> = Promise.resolve(undefined);
  const fault = async () => {
    const master = await cluster.masterOf(key);
    killed = master;
    say(`   kill -9 the master of ${key} (port ${master})`);
    cluster.kill(master);
    const killedAt = Date.now();
    await until("a replica promoted", 60_000, async () => (await cluster.masterOf(key)) !== master);
    const promotedAt = Date.now();
    say(`   its replica promoted ${((promotedAt - killedAt) / 1000).toFixed(1)} s after the kill`);
    // Deliveries flow again: a message gets its provider id after the promotion.
    const before = await deliveredCount(db, shop);
    deliveriesResumed = (async () => {
      while (Date.now() - promotedAt < 60_000) {
        const now = await deliveredCount(db, shop).catch(() => before);
        if (now > before) return Date.now() - promotedAt;
        await Bun.sleep(100);
      }
      return undefined;
    })();
    return promotedAt;
  };
  const { tally, faultEnd } = await load(
    opts.n,
    (t, i) => attempt(t, i, sendRequest(shop, index, i), messageIdOf),
    { at: 0.35, run: fault },
  );
  const promotedAt = await faultEnd;
  const deliveryMs = await deliveriesResumed;
  const row = await measureOutbound(db, scenario, shop, opts.n, tally, promotedAt, deathsBefore);
  row.notes.push(`deliveries ${seconds(deliveryMs)} after the promotion`);
  if (row.recoverMs === undefined || row.recoverMs > FAILOVER_RECOVERY_MS)
    row.notes.push(`late: sends accepted again ${seconds(row.recoverMs)} after the promotion`);
  if (deliveryMs === undefined || deliveryMs > FAILOVER_RECOVERY_MS)
    row.notes.push(`late: deliveries ${seconds(deliveryMs)} after the promotion`);

  // A worker stops as quickly after a failover as before one.
  for (const name of ["send-1", "maintenance"]) {
    const child = children.get(name);
    if (!child) continue;
    const from = Date.now();
    await stopChild(child);
    const tookMs = Date.now() - from;
    row.notes.push(`${name} stopped in ${seconds(tookMs)}`);
    if (tookMs > STOP_AFTER_FAILOVER_MS) row.notes.push(`late: ${name} took ${seconds(tookMs)} to stop`);
    respawn(name);
  }
  if (killed !== undefined) {
    const port = killed;
    cluster.restart(port);
    await until(`port ${port} back as a replica in sync`, 60_000, () => cluster.isSyncedReplica(port));
  }
  return row;
}

/** 200 sends, every one delivered; Redis flushed; the same 200 requests again: all replays. */
async function flushallReplay(db: Db, index: number): Promise<Row> {
  const shop = await openShop(db, index);
  const deathsBefore = deaths.length;
  const n = Math.min(opts.n, 200);
  const first = await load(n, (t, i) => attempt(t, i, sendRequest(shop, index, i), messageIdOf));
  await settleOutbound(db, shop, first.tally.ids.size);
  say("   FLUSHALL");
  const redis = createRedis(REDIS_URL);
  try {
    await redis.flushall();
  } finally {
    redis.disconnect();
  }
  const flushedAt = Date.now();
  const replay = await load(n, (t, i) => attempt(t, i, sendRequest(shop, index, i), messageIdOf));
  const row = await measureOutbound(db, "flushall-replay", shop, n, replay.tally, flushedAt, deathsBefore);
  // A replay must answer the first request's message: a new one (201, another id) is a duplicate.
  let changed = 0;
  for (const [i, id] of replay.tally.ids) if (first.tally.ids.get(i) !== id) changed++;
  row.duplicates += changed;
  row.stalled ||= first.tally.stalled;
  row.notes.push(`replays ${replay.tally.replayed}/${n}`);
  if (replay.tally.replayed !== n) row.notes.push("not every repeat was a replay");
  return row;
}

/**
 * A customer's message through the simulator's POST /_sim/inbound: answered with the status the api
 * gave the simulator's webhook (what the provider would see), so that `attempt` retries a refusal.
 */
async function customerWrites(body: string): Promise<Response> {
  const response = await fetch(`${simulatorUrl}/_sim/inbound`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body,
    signal: AbortSignal.timeout(20_000),
  });
  const answer = (await response.json()) as { webhook_status: number | null };
  return new Response(null, { status: answer.webhook_status ?? 599 });
}

/** Inbound webhooks from the simulator (retried by the client until the api took them). */
async function inboundScenario(db: Db, index: number): Promise<Row> {
  const shop = await openShop(db, index);
  const deathsBefore = deaths.length;
  const n = opts.n;
  const wamid = (i: number) => `wamid.faults-${index}-${i}`;
  const { tally, faultEnd } = await load(
    n,
    async (t, i) => {
      const body = JSON.stringify({
        phone_number_id: shop.phoneNumberId,
        from: `49152${String(i).padStart(8, "0")}`,
        type: "text",
        text: `hello ${i}`,
        id: wamid(i),
      });
      await attempt(
        t,
        i,
        () => customerWrites(body),
        async () => wamid(i),
      );
    },
    { at: 0.3, run: () => killAndRestart("finalize") },
  );
  const end = await faultEnd;
  const from = Date.now();
  let settleMs: number | undefined;
  const pending = () =>
    db
      .selectFrom("inbound_events")
      .select(sql<number>`count(*)::int`.as("n"))
      .where("tenant_id", "=", shop.tenantId)
      .where("finalized_at", "is", null)
      .executeTakeFirstOrThrow();
  while (Date.now() - from < opts.settleTimeoutMs) {
    const left = await pending().catch(() => undefined);
    if (left?.n === 0) {
      settleMs = Date.now() - from;
      break;
    }
    await Bun.sleep(1000);
  }
  const messages = await db
    .selectFrom("messages")
    .select(["provider_message_id"])
    .where("tenant_id", "=", shop.tenantId)
    .where("direction", "=", "inbound")
    .execute();
  const perProviderId = new Map<string, number>();
  for (const m of messages)
    perProviderId.set(m.provider_message_id ?? "", (perProviderId.get(m.provider_message_id ?? "") ?? 0) + 1);
  const acknowledged = new Set(tally.ids.values());
  return {
    scenario: "inbound-finalize-kill",
    n,
    ...loadFigures(tally, deathsBefore),
    rows: messages.length,
    sends: undefined,
    duplicates: repeats(perProviderId.values()),
    lost: [...acknowledged].filter((id) => !perProviderId.has(id)).length,
    notRead: (await pending()).n,
    stalled: tally.stalled,
    recoverMs: recoverMs(tally, end),
    settleMs,
    notes: ["inbound: rows are messages, not-read are unfinalized events"],
  };
}

/**
 * Identity under load (DESIGN §14). Every customer writes twice without a phone (`hide_phone`: known
 * by a BSUID alone). Between the two, every other one is sent a template by phone: that makes a
 * second contact, known by phone alone, until the send's status names the BSUID and proves them one
 * person (merged, or the BSUID attached when the status came first). Redis is killed and restarted
 * empty at 30 %. 0 lost, 0 duplicated, one live contact per person, no message on a merged contact.
 */
async function identityScenario(db: Db, index: number): Promise<Row> {
  const shop = await openShop(db, index);
  const deathsBefore = deaths.length;
  const persons = Math.max(2, Math.floor(opts.n / 4));
  const phone = (p: number) => `4916${String(index).padStart(2, "0")}${String(p).padStart(7, "0")}`;
  // The BSUID the simulator gives the number (stable, derived from it).
  const userId = (p: number) => bsuidForPhone(phone(p));
  const wamid = (p: number, k: number) => `wamid.identity-${index}-${p}-${k}`;
  const everyone = Array.from({ length: persons }, (_, p) => p);
  type Step = { person: number; write: number } | { person: number; send: true };
  const steps: Step[] = [
    ...everyone.map((person) => ({ person, write: 0 })),
    ...everyone.filter((p) => p % 2 === 1).map((person) => ({ person, send: true as const })),
    ...everyone.map((person) => ({ person, write: 1 })),
  ];
  const { tally, faultEnd } = await load(
    steps.length,
    async (t, i) => {
      const step = steps[i] as Step;
      if ("send" in step) {
        const body = JSON.stringify({
          to: `+${phone(step.person)}`,
          template: { name: "order_shipped", language: "en", variables: { body: ["Ada", `#${i}`] } },
        });
        const headers = {
          authorization: `Bearer ${shop.token}`,
          "content-type": "application/json",
          "idempotency-key": `identity-${index}-${step.person}`,
        };
        await attempt(
          t,
          i,
          () =>
            fetch(`${apiUrl}/v2/messages`, {
              method: "POST",
              headers,
              body,
              signal: AbortSignal.timeout(20_000),
            }),
          messageIdOf,
        );
        return;
      }
      const body = JSON.stringify({
        phone_number_id: shop.phoneNumberId,
        from: phone(step.person),
        hide_phone: true,
        type: "text",
        text: `hello ${step.write}`,
        id: wamid(step.person, step.write),
      });
      await attempt(
        t,
        i,
        () => customerWrites(body),
        async () => wamid(step.person, step.write),
      );
    },
    { at: 0.3, run: restartRedisEmpty },
  );
  const end = await faultEnd;
  const sent = steps.filter((step) => "send" in step).length;
  const unfinalized = async () =>
    (
      await db
        .selectFrom("inbound_events")
        .select(sql<number>`count(*)::int`.as("n"))
        .where("tenant_id", "=", shop.tenantId)
        .where("finalized_at", "is", null)
        .executeTakeFirstOrThrow()
    ).n;
  const settleMs = await settleOutbound(db, shop, sent);
  const finalizeBy = Date.now() + opts.settleTimeoutMs;
  while ((await unfinalized().catch(() => 1)) > 0 && Date.now() < finalizeBy) await Bun.sleep(1000);

  const messages = await db
    .selectFrom("messages")
    .select(["id", "direction", "status", "provider_message_id", "contact_id"])
    .where("tenant_id", "=", shop.tenantId)
    .execute();
  const inbound = messages.filter((m) => m.direction === "inbound");
  const outbound = messages.filter((m) => m.direction === "outbound");
  const perWamid = new Map<string, number>();
  for (const m of inbound)
    perWamid.set(m.provider_message_id ?? "", (perWamid.get(m.provider_message_id ?? "") ?? 0) + 1);
  const sends = await providerSends(shop.phoneNumberId);
  const acknowledged = [...new Set(tally.ids.values())];
  const outboundIds = new Set(outbound.map((m) => m.id ?? ""));
  const lost =
    acknowledged.filter((id) => id.startsWith("wamid.") && !perWamid.has(id)).length +
    acknowledged.filter((id) => !id.startsWith("wamid.") && !outboundIds.has(id)).length +
    outbound.filter((m) => !sends.has(m.id ?? "")).length;

  // Who each person is now: the live contacts found by their phone, their BSUID, or a BSUID they had.
  const contacts = await db
    .selectFrom("contacts")
    .select(["id", "phone", "user_id", "merged_into"])
    .where("tenant_id", "=", shop.tenantId)
    .execute();
  const formerIds = await db
    .selectFrom("contact_user_ids")
    .select(["user_id", "contact_id"])
    .where("tenant_id", "=", shop.tenantId)
    .execute();
  const byId = new Map(contacts.map((c) => [c.id, c]));
  const live = (id: string): string => {
    let contact = byId.get(id);
    for (let hops = 0; contact?.merged_into && hops < 10; hops++) contact = byId.get(contact.merged_into);
    return contact?.id ?? id;
  };
  let split = 0;
  for (const p of everyone) {
    const found = new Set<string>();
    for (const c of contacts)
      if (!c.merged_into && (c.phone === `+${phone(p)}` || c.user_id === userId(p))) found.add(c.id);
    for (const f of formerIds) if (f.user_id === userId(p)) found.add(live(f.contact_id));
    if (found.size !== 1) split++;
  }
  const mergedIds = new Set(contacts.filter((c) => c.merged_into).map((c) => c.id));
  return {
    scenario: "identity-redis-restart",
    n: steps.length,
    ...loadFigures(tally, deathsBefore),
    rows: messages.length,
    sends: [...sends.values()].reduce((a, b) => a + b, 0),
    duplicates: repeats(perWamid.values()) + repeats(sends.values()),
    lost,
    notRead: outbound.filter((m) => m.status !== "read").length + (await unfinalized()),
    stalled: tally.stalled,
    recoverMs: recoverMs(tally, end),
    settleMs,
    notes: [`identity: ${persons} people, ${mergedIds.size} contacts merged into another`],
    identity: {
      persons,
      split,
      onMerged: messages.filter((m) => mergedIds.has(m.contact_id)).length,
      merged: mergedIds.size,
    },
  };
}

/**
 * The shop's webhook deliveries, once the scenario is over: waits (bounded) until its receiver has
 * had every event of the log (events about a contact, `contact.merged`, included), then counts the
 * events it never got, the contacts whose events did not first arrive in log order, and the repeats
 * (at least once: allowed, counted). A contact is the one each post named: two contacts merged
 * later (DESIGN §14) were two ordered streams until then, posted side by side.
 */
async function webhookFigures(db: Db, shop: Shop): Promise<NonNullable<Row["webhook"]>> {
  const from = Date.now();
  const events = async () =>
    (
      await sql<{ id: string; seq: number; contact_id: string }>`
        SELECT e.id, e.seq, coalesce(m.contact_id, e.contact_id) AS contact_id
        FROM events e LEFT JOIN messages m ON m.id = e.message_id
        WHERE e.tenant_id = ${shop.tenantId} ORDER BY e.seq`.execute(db)
    ).rows;
  let log = await events().catch(() => []);
  let settleMs: number | undefined;
  while (Date.now() - from < opts.settleTimeoutMs) {
    const got = new Set(shop.receiver.arrivals);
    log = await events().catch(() => log);
    if (log.length > 0 && log.every((event) => got.has(event.id))) {
      settleMs = Date.now() - from;
      break;
    }
    await Bun.sleep(1000);
  }
  await shop.receiver.stop();
  const got = new Set(shop.receiver.arrivals);
  const seqOf = new Map(log.map((event) => [event.id, event]));
  // Each contact's events in the order they first arrived must be in log order.
  const lastSeq = new Map<string, number>();
  const disordered = new Set<string>();
  const seen = new Set<string>();
  for (const id of shop.receiver.arrivals) {
    const event = seqOf.get(id);
    if (!event || seen.has(id)) continue;
    seen.add(id);
    const contact = shop.receiver.contactOf.get(id) ?? event.contact_id;
    if ((lastSeq.get(contact) ?? 0) > event.seq) disordered.add(contact);
    lastSeq.set(contact, event.seq);
  }
  return {
    events: log.length,
    lost: log.filter((event) => !got.has(event.id)).length,
    outOfOrder: disordered.size,
    duplicates: shop.receiver.arrivals.length - got.size,
    settleMs,
  };
}

async function receiverDownFor(shop: Shop, seconds: number): Promise<number> {
  say(`   the webhook receiver down (for ${seconds} s)`);
  await shop.receiver.down();
  await Bun.sleep(seconds * 1000);
  shop.receiver.up();
  say("   the webhook receiver answers again");
  return Date.now();
}

// ---------------------------------------------------------------------------------------------
// Scheduled sends (DESIGN §13): n messages due in the same second; Redis restarted empty around
// it, a send worker killed while the backlog goes out, cancels racing the claims.

/** From acceptance to the due second: send_at must be at least now + 60 s (a margin for the calls). */
const SCHEDULE_LEAD_S = 63;
/** The scenario sender's pace: the backlog of 2,000 takes 10 s, longer than the valid_for below. */
const SCHEDULED_MPS = 200;
/** valid_for of every fourth message: some go out in time, the ones behind the backlog expire. */
const SCHEDULED_VALID_FOR_S = 5;
/**
 * How much later than send_at + valid_for the simulator's clock may stamp a send: the way from the
 * worker's last look at the expiry to the simulator (same machine, same clock).
 */
const VALID_FOR_TOLERANCE_MS = 500;
/** Items per POST /v2/messages/batch (the most it takes). */
const BATCH_ITEMS = 1000;
/** What a settled message of this scenario is: read, failed (expired) or canceled. */
const FINAL_STATUSES = new Set(["read", "failed", "canceled"]);

const count = (statuses: Map<string, number>, label: string, by = 1) =>
  statuses.set(label, (statuses.get(label) ?? 0) + by);

const sleepUntil = (epochMs: number) => Bun.sleep(Math.max(0, epochMs - Date.now()));

/**
 * One POST /v2/messages/batch, retried whole until it is answered 200 (its items keep their
 * idempotency keys, so what a lost answer had accepted is replayed, 200). Each row counts in the
 * tally by its status (`201`, `200`, a refusal); a call's own failure as `batch <status>`.
 */
async function sendBatch(
  shop: Shop,
  tally: Tally,
  items: { index: number; body: Record<string, unknown> }[],
): Promise<void> {
  const body = JSON.stringify({ messages: items.map((item) => item.body) });
  const deadline = Date.now() + REQUEST_DEADLINE_MS;
  for (;;) {
    let label: string;
    try {
      const response = await fetch(`${apiUrl}/v2/messages/batch`, {
        method: "POST",
        headers: { authorization: `Bearer ${shop.token}`, "content-type": "application/json" },
        body,
        signal: AbortSignal.timeout(30_000),
      });
      label = `batch ${response.status}`;
      if (response.status === 200) {
        const list = (await response.json()) as {
          data: { index: number; status: number; message: { id: string } | null }[];
        };
        for (const row of list.data) {
          const index = items[row.index]?.index ?? -1;
          count(tally.statuses, String(row.status));
          if (row.message && (row.status === 201 || row.status === 200)) {
            tally.ids.set(index, row.message.id);
            if (row.status === 201) tally.created++;
            else tally.replayed++;
            tally.okAt.push(Date.now());
          } else tally.refused++;
        }
        return;
      }
      await response.arrayBuffer();
      if (response.status < 500 && response.status !== 429) {
        count(tally.statuses, label);
        tally.refused += items.length;
        return;
      }
    } catch (error) {
      label = `batch ${(error as Error).name === "TimeoutError" ? "timeout" : "conn"}`;
    }
    count(tally.statuses, label);
    if (Date.now() > deadline) {
      tally.gaveUp += items.length;
      return;
    }
    await Bun.sleep(500);
  }
}

/**
 * POST /v2/messages/{id}/cancel until the api decides it (200, 409, any other 4xx but 429): retried
 * every 250 ms while it cannot (503 with Redis away, 429, no connection), not after Retry-After, so
 * that the cancels land while the sends go out. Every answer counts as `cancel <status>`; resolves
 * with the deciding status, or undefined when none came within a minute.
 */
async function cancelUntilDecided(
  shop: Shop,
  id: string,
  statuses: Map<string, number>,
): Promise<number | undefined> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const response = await fetch(`${apiUrl}/v2/messages/${id}/cancel`, {
        method: "POST",
        headers: { authorization: `Bearer ${shop.token}` },
        signal: AbortSignal.timeout(10_000),
      });
      await response.arrayBuffer();
      count(statuses, `cancel ${response.status}`);
      if (response.status < 500 && response.status !== 429) return response.status;
    } catch (error) {
      count(statuses, `cancel ${(error as Error).name === "TimeoutError" ? "timeout" : "conn"}`);
    }
    if (Date.now() > deadline) return undefined;
    await Bun.sleep(250);
  }
}

/**
 * n messages (in batches of 1,000, each item its idempotency_key) scheduled for the same second,
 * two to each contact; every fourth with valid_for 5 s, at a sender pace of 200/s (so the backlog
 * outlasts it). Three seconds before the due second half of the cancels; one second before it Redis
 * is killed and started again empty (3 s away); at the due second the other half of the cancels,
 * retried until decided; once the provider has had half of the sends, send-1 is killed (kill -9)
 * and started again. When every message is read, failed or canceled: no duplicate, no loss (every
 * message not canceled with a 200 and not failed `expired` reached the provider), nothing received
 * after a 200 cancel, nothing received past send_at + valid_for (nor any expired message at all).
 */
async function scheduledScenario(db: Db, index: number): Promise<Row> {
  const shop = await openShop(db, index, { mps: SCHEDULED_MPS });
  const deathsBefore = deaths.length;
  const n = opts.n;
  const contacts = Math.ceil(n / 2);
  const sendAt = Math.ceil(Date.now() / 1000) + SCHEDULE_LEAD_S;
  const dueAt = sendAt * 1000;
  const validFor = (i: number) => (i % 4 === 2 ? SCHEDULED_VALID_FOR_S : undefined);
  // 3 in 20, one of them with a valid_for.
  const toCancel = (i: number) => i % 20 === 2 || i % 20 === 7 || i % 20 === 13;
  const notes: string[] = [];

  const tally = newTally();
  say(`   ${n} sends scheduled for ${new Date(dueAt).toISOString()} (in batches of ${BATCH_ITEMS})`);
  for (let from = 0; from < n; from += BATCH_ITEMS) {
    const items = [];
    for (let i = from; i < Math.min(n, from + BATCH_ITEMS); i++) {
      const seconds = validFor(i);
      items.push({
        index: i,
        body: {
          to: `+49151${index}${String(i % contacts).padStart(7, "0")}`,
          template: { name: "order_shipped", language: "en", variables: { body: ["Ada", `#${i}`] } },
          send_at: sendAt,
          ...(seconds !== undefined && { valid_for: seconds }),
          idempotency_key: `faults-${index}-${i}`,
        },
      });
    }
    await sendBatch(shop, tally, items);
  }
  say(
    `   accepted: ${describeStatuses(tally.statuses)}; ${((dueAt - Date.now()) / 1000).toFixed(0)} s to go`,
  );
  if (Date.now() > dueAt - 5000)
    notes.push("late: the batches were accepted less than 5 s before the due second");

  // The cancels: every other one 3 s before the due second, the rest at it.
  const cancelIds = [...tally.ids].filter(([i]) => toCancel(i)).map(([, id]) => id);
  const early = cancelIds.filter((_, k) => k % 2 === 0);
  const atDue = cancelIds.filter((_, k) => k % 2 === 1);
  const decided = new Map<string, number | undefined>();
  const cancelWave = (ids: string[]) =>
    inPool(ids, opts.clients, async (id) => {
      decided.set(id, await cancelUntilDecided(shop, id, tally.statuses));
    });

  await sleepUntil(dueAt - 3000);
  say(`   ${early.length} cancels, 3 s before the due second`);
  const earlyWave = cancelWave(early);
  await sleepUntil(dueAt - 1000);
  const redisBack = restartRedisEmpty();
  await sleepUntil(dueAt);
  say(`   the due second: ${atDue.length} cancels`);
  const dueWave = cancelWave(atDue);
  await redisBack;
  // A send worker killed while the backlog goes out, once it has gone on past the valid_for (its
  // claims then wait SEND_IN_DOUBT_MS): so that messages claimed before their expiry are still
  // waiting for their sender's tokens after it.
  const flowing = await until("the provider has had half of the sends", 30_000, async () => {
    let sends = 0;
    for (const c of (await providerSends(shop.phoneNumberId)).values()) sends += c;
    return sends >= n / 2 ? sends : undefined;
  }).catch((error: Error) => {
    notes.push(`late: ${error.message}`);
    return undefined;
  });
  say(
    `   ${flowing ?? "?"} sends received ${((Date.now() - dueAt) / 1000).toFixed(1)} s after the due second`,
  );
  await killAndRestart("send-1");
  await Promise.all([earlyWave, dueWave]);

  // Settled: every message read, failed or canceled.
  const settleFrom = Date.now();
  let settleMs: number | undefined;
  while (Date.now() - settleFrom < opts.settleTimeoutMs) {
    const rows = await outboundRows(db, shop.tenantId).catch(() => undefined);
    if (rows && rows.length >= tally.ids.size && rows.every((r) => FINAL_STATUSES.has(r.status ?? ""))) {
      settleMs = Date.now() - settleFrom;
      break;
    }
    await Bun.sleep(1000);
  }

  const rows = await db
    .selectFrom("messages")
    .select(["id", "status", "failure", "expires_at"])
    .where("tenant_id", "=", shop.tenantId)
    .where("direction", "=", "outbound")
    .execute();
  const receipts = await providerReceipts(shop.phoneNumberId);
  const byId = new Map(rows.map((r) => [r.id ?? "", r]));
  const acknowledged = new Set(tally.ids.values());
  const canceled = new Set([...decided].filter(([, status]) => status === 200).map(([id]) => id));
  const isExpired = (r: (typeof rows)[number] | undefined) =>
    r?.status === "failed" && r.failure?.code === "expired";

  // No row, or never received though neither canceled with a 200 nor expired.
  const lost = [...acknowledged].filter(
    (id) => !byId.has(id) || (!receipts.has(id) && !canceled.has(id) && !isExpired(byId.get(id))),
  ).length;
  const sentAfterCancel = [...canceled].filter((id) => receipts.has(id)).length;
  let sentLate = 0;
  let inTime = 0;
  let latestMs = Number.NEGATIVE_INFINITY;
  for (const row of rows) {
    const times = receipts.get(row.id ?? "");
    if (!times) continue;
    if (isExpired(row)) {
      sentLate++;
      continue;
    }
    if (!row.expires_at) continue;
    // Any receipt past the expiry is a send past valid_for (a repeat too).
    const late = Math.max(...times) - row.expires_at.getTime();
    latestMs = Math.max(latestMs, late);
    if (late > VALID_FOR_TOLERANCE_MS) sentLate++;
    else inTime++;
  }
  const expired = rows.filter(isExpired).length;
  const withValidFor = rows.filter((r) => r.expires_at !== null).length;
  const answers = (ids: string[], status: number) => ids.filter((id) => decided.get(id) === status).length;
  const undecided = [...decided.values()].filter((status) => status === undefined).length;
  const canceledRows = rows.filter((r) => r.status === "canceled").length;

  notes.push(
    `cancels 3 s before: ${answers(early, 200)}/${early.length} answered 200; at the due second: ` +
      `${answers(atDue, 200)} 200, ${answers(atDue, 409)} 409, of ${atDue.length}; ${canceledRows} messages canceled`,
    `valid_for ${SCHEDULED_VALID_FOR_S} s on ${withValidFor}: ${inTime} sent in time, ${expired} expired, ` +
      `${sentLate} sent late; the latest receipt ${Number.isFinite(latestMs) ? `${latestMs} ms` : "-"} against its expiry`,
  );
  if (undecided > 0) notes.push(`not every cancel was decided: ${undecided} never answered 200 or 409`);
  if (canceledRows !== canceled.size)
    notes.push(
      `not every canceled message had a 200: ${canceledRows} canceled, ${canceled.size} answered 200`,
    );
  if (expired === 0 || inTime === 0)
    notes.push("(valid_for: the backlog did not put messages on both sides of the expiry this time)");

  return {
    scenario: "scheduled-redis-kill",
    n,
    ...loadFigures(tally, deathsBefore),
    rows: rows.length,
    sends: [...receipts.values()].reduce((sum, times) => sum + times.length, 0),
    duplicates: repeats([...receipts.values()].map((times) => times.length)),
    lost,
    notRead: rows.filter((r) => !FINAL_STATUSES.has(r.status ?? "")).length,
    stalled: false,
    recoverMs: undefined,
    settleMs,
    notes,
    scheduled: {
      canceled: canceled.size,
      sentAfterCancel,
      expired,
      sentLate,
      failedOtherwise: rows.filter((r) => r.status === "failed" && !isExpired(r)).length,
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The table

function failures(row: Row): string[] {
  const problems: string[] = [];
  if (row.duplicates > 0) problems.push(`${row.duplicates} duplicate(s)`);
  if (row.lost > 0) problems.push(`${row.lost} lost`);
  // "500", or a labelled one ("cancel 500").
  const fiveHundreds = [...row.statuses]
    .filter(([status]) => status === "500" || status.endsWith(" 500"))
    .reduce((sum, [, count]) => sum + count, 0);
  if (fiveHundreds > 0) problems.push(`${fiveHundreds} x 500`);
  if (row.died.length > 0) problems.push(`died: ${row.died.join(", ")}`);
  if (row.notRead > 0) problems.push(`${row.notRead} stuck`);
  if (row.unanswered > 0) problems.push(`${row.unanswered} requests never answered 2xx`);
  if (row.stalled) problems.push("load stalled");
  if (row.accepted !== row.n) problems.push(`${row.accepted}/${row.n} accepted`);
  if (row.settleMs === undefined) problems.push("did not settle");
  if (row.webhook) {
    if (row.webhook.lost > 0) problems.push(`${row.webhook.lost} event(s) never reached the receiver`);
    if (row.webhook.outOfOrder > 0)
      problems.push(`${row.webhook.outOfOrder} contact(s) with events out of order`);
    if (row.webhook.events === 0) problems.push("no events");
  }
  if (row.scheduled) {
    const s = row.scheduled;
    if (s.sentAfterCancel > 0) problems.push(`${s.sentAfterCancel} sent after a 200 cancel`);
    if (s.sentLate > 0) problems.push(`${s.sentLate} sent past valid_for`);
    if (s.failedOtherwise > 0) problems.push(`${s.failedOtherwise} failed other than expired`);
  }
  if (row.identity) {
    if (row.identity.split > 0) problems.push(`${row.identity.split} person(s) not exactly one live contact`);
    if (row.identity.onMerged > 0) problems.push(`${row.identity.onMerged} message(s) on a merged contact`);
  }
  for (const note of row.notes)
    if (note.startsWith("not every") || note.startsWith("late:")) problems.push(note);
  return problems;
}

function describeStatuses(statuses: Map<string, number>): string {
  return [...statuses.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([status, count]) => `${status}:${count}`)
    .join(" ");
}

const seconds = (ms: number | undefined) => (ms === undefined ? "-" : `${(ms / 1000).toFixed(1)} s`);

function printTable(rows: Row[]): void {
  const header = [
    "scenario",
    "n",
    "accepted",
    "rows",
    "sends",
    "dup",
    "lost",
    "not read",
    "died",
    "recover",
    "settle",
    "events",
    "wh lost",
    "wh order",
    "wh dup",
    "wh settle",
    "canceled",
    "sent after cancel",
    "expired",
    "past valid_for",
    "client statuses",
  ];
  const lines = rows.map((row) => [
    row.scenario,
    String(row.n),
    String(row.accepted),
    String(row.rows),
    row.sends === undefined ? "-" : String(row.sends),
    String(row.duplicates),
    String(row.lost),
    String(row.notRead),
    String(row.died.length),
    seconds(row.recoverMs),
    seconds(row.settleMs),
    row.webhook ? String(row.webhook.events) : "-",
    row.webhook ? String(row.webhook.lost) : "-",
    row.webhook ? String(row.webhook.outOfOrder) : "-",
    row.webhook ? String(row.webhook.duplicates) : "-",
    seconds(row.webhook?.settleMs),
    row.scheduled ? String(row.scheduled.canceled) : "-",
    row.scheduled ? String(row.scheduled.sentAfterCancel) : "-",
    row.scheduled ? String(row.scheduled.expired) : "-",
    row.scheduled ? String(row.scheduled.sentLate) : "-",
    describeStatuses(row.statuses),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const format = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(" | ")} |`;
  console.log(format(header));
  console.log(`| ${widths.map((w) => "-".repeat(w)).join(" | ")} |`);
  for (const line of lines) console.log(format(line));
}

// ---------------------------------------------------------------------------------------------
// The run

async function main(): Promise<number> {
  say(
    `fault suite: ${opts.only.length} scenario(s), n=${opts.n}, ${opts.clients} clients; folder ${RUN_DIR}`,
  );
  say(
    `private postgres on ${ports.pg} (${pgTools.bin}${pgTools.user ? `, as ${pgTools.user}` : ""}), redis on ${ports.redis}`,
  );
  await postgres.init();
  await postgres.start();
  if (opts.cluster) {
    redisCluster = await startRedisCluster({ replicas: 1, nodeTimeoutMs: 3000 });
    childEnv.REDIS_CLUSTER_NODES = redisCluster.nodes;
    say(`redis cluster of 3 masters + 3 replicas: ${redisCluster.nodes}`);
  } else startRedis();
  await waitRedis();
  await ensureDatabase(DATABASE_URL);
  const db = createDb(DATABASE_URL, { max: 4, applicationName: "faults-bench" });
  try {
    await migrate(db);
    spawnChild("simulator", ["bun", "src/simulator/server.ts"]);
    await waitHttp(`${simulatorUrl}/_sim/health`, "simulator");
    for (const name of ["send-1", "send-2"]) spawnChild(name, ["bun", "workers/send.ts"]);
    spawnChild("status", ["bun", "workers/status.ts"]);
    spawnChild("finalize", ["bun", "workers/finalize.ts"]);
    spawnChild("maintenance", ["bun", "workers/maintenance.ts"]);
    spawnChild("webhook", ["bun", "workers/webhook.ts"]);
    spawnChild("api", ["bun", "src/server.ts"]);
    await waitHttp(`${apiUrl}/readyz`, "api");
    await Bun.sleep(1000);

    const rows: Row[] = [];
    for (const [index, scenario] of SCENARIOS.entries()) {
      if (!opts.only.includes(scenario)) continue;
      reviveTheDead();
      await waitHttp(`${apiUrl}/readyz`, "api", { timeoutMs: 60_000 });
      say(`== ${scenario}`);
      const logMarks = markLogs(LOG_DIR);
      let row: Row;
      switch (scenario) {
        case "baseline":
          row = await outboundScenario(db, scenario, index);
          break;
        case "send-worker-kill":
          row = await outboundScenario(db, scenario, index, () => killAndRestart("send-1"));
          break;
        case "status-worker-kill":
          row = await outboundScenario(db, scenario, index, () => killAndRestart("status"));
          break;
        case "redis-restart":
          row = await outboundScenario(db, scenario, index, restartRedisEmpty);
          break;
        case "postgres-5s":
          row = await outboundScenario(db, scenario, index, () => stopPostgresFor(5));
          break;
        case "postgres-30s":
          row = await outboundScenario(db, scenario, index, () => stopPostgresFor(30));
          break;
        case "flushall-replay":
          row = await flushallReplay(db, index);
          break;
        case "inbound-finalize-kill":
          row = await inboundScenario(db, index);
          break;
        case "webhook-worker-kill":
          row = await outboundScenario(db, scenario, index, () => killAndRestart("webhook"));
          break;
        case "receiver-down-60s":
          row = await outboundScenario(db, scenario, index, (shop) => receiverDownFor(shop, 60));
          break;
        case "event-partitions":
          row = await outboundScenario(db, scenario, index, () => rollEventPartitions(db));
          break;
        case "scheduled-redis-kill":
          row = await scheduledScenario(db, index);
          break;
        case "identity-redis-restart":
          row = await identityScenario(db, index);
          break;
        case "failover-queue-master":
          // Every send job's key: the send queue's hash tag.
          row = await failoverScenario(db, scenario, index, () => `${queuePrefix(REDIS_PREFIX, "send")}:id`);
          break;
        case "failover-tenant-master":
          // The tenant's rate limit, quota, idempotency and directory keys share its hash tag.
          row = await failoverScenario(
            db,
            scenario,
            index,
            (shop) => `${REDIS_PREFIX}:{t:${shop.tenantId}}:quota`,
          );
          break;
      }
      const shop = currentShop;
      currentShop = undefined;
      if (shop) row.webhook = await webhookFigures(db, shop);
      // Every process must still be there (the ones we killed were started again).
      for (const child of children.values()) {
        if (!alive(child) && !child.expectedExit && !row.died.includes(child.name)) row.died.push(child.name);
      }
      for (const note of row.notes) say(`   ${note}`);
      const problems = failures(row);
      say(`   ${problems.length === 0 ? "ok" : `FAILED: ${problems.join("; ")}`}`);
      // CI keeps only this output: a failure says here what the processes and the queue saw.
      if (problems.length > 0) {
        if (shop && row.webhook && row.webhook.lost > 0)
          for (const line of await describeEndpointBacklog(db, redisTarget(), REDIS_PREFIX, shop.endpointId))
            say(`   ${line}`);
        for (const line of newWarnings(LOG_DIR, logMarks)) say(`   ${line}`);
      }
      rows.push(row);
    }

    console.log("");
    printTable(rows);
    const failed = rows.filter((row) => failures(row).length > 0);
    // "FAILED <scenario>: …" lines: .ci/run repeats them at the end of its output.
    for (const row of failed) console.log(`FAILED ${row.scenario}: ${failures(row).join("; ")}`);
    console.log(`faults: ${rows.length - failed.length} passed, ${failed.length} failed`);
    return failed.length;
  } finally {
    await db.destroy();
  }
}

const watchdogSeconds =
  300 +
  opts.only.length * (Math.ceil(opts.n / 10) + LOAD_STALL_MS / 1000 + (2 * opts.settleTimeoutMs) / 1000 + 60);
const watchdog = setTimeout(() => {
  console.error(`faults: time limit of ${watchdogSeconds} s reached, stopping everything`);
  console.log("faults: 0 passed, 1 failed");
  void cleanup(true).then(() => process.exit(2));
}, watchdogSeconds * 1000);

let failedCount = 1;
try {
  failedCount = await main();
} catch (error) {
  console.error(`faults: ${(error as Error).stack ?? error}`);
  console.log("faults: 0 passed, 1 failed");
} finally {
  clearTimeout(watchdog);
  await cleanup(opts.keep || failedCount > 0);
}
process.exit(failedCount > 0 ? 1 : 0);
