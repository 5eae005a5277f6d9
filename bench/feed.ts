/**
 * Feed benchmark, run by hand: `bun bench/feed.ts` (not part of the test suite). Needs the local
 * Postgres and Redis; makes its own database and Redis prefix and drops them at the end. Loopback only.
 *
 *   (a) ingest: signed webhooks (`--per-webhook N` messages each, default 1: the common case) into a
 *       real api process and finalize worker processes; sustained inbound messages/s, and time from
 *       each webhook's 200 to the message's first appearance in GET /messages (p50/p99).
 *   (b) feed read: a tenant with 200,000 messages read from the start with limit=500; messages/s and
 *       page latency p99.
 *   (c) empty-poll: many connections (64) polling GET /messages with a cursor at the head, as idle
 *       integrators do; req/s, p50/p99, and Postgres transactions per poll (0: the head is in Redis).
 *       With wrk installed it drives the load (as in issue 13's figure), else this process does.
 *   (d) lost-nothing at a large size: the loss count.
 *
 * Sizes can be changed with BENCH_INGEST_RATE, BENCH_INGEST_SECONDS, BENCH_FINALIZE_WORKERS,
 * BENCH_WEBHOOKS_IN_FLIGHT, BENCH_PER_WEBHOOK, BENCH_FEED_MESSAGES, BENCH_POLL_CONNECTIONS,
 * BENCH_POLL_SECONDS, BENCH_LOST_WRITERS, BENCH_LOST_PER_WRITER and BENCH_FEED_SHARDS (FEED_SHARDS, 1); BENCH_PHASES (or `--mode`) picks
 * phases, comma-separated (default `ingest,read,lost`; `--mode empty-poll` runs that one alone).
 */
import { parseArgs } from "node:util";
import { sql } from "kysely";
import { createApp } from "../src/app.ts";
import { signPayload } from "../src/channel/signature.ts";
import { buildWebhook } from "../src/channel/webhook-payloads.ts";
import { loadConfig } from "../src/config.ts";
import { createDb, type Db, dropDatabase, ensureDatabase } from "../src/db/connect.ts";
import { migrate } from "../src/db/migrate.ts";
import { buildDeps, closeDeps } from "../src/deps.ts";
import { createFeedHeadWriter, type FeedHeadWriter, parseFeedHead } from "../src/feed/heads.ts";
import { sequenceFeed } from "../src/feed/sequencer.ts";
import { newId, randomBase62 } from "../src/ids.ts";
import { createLogger } from "../src/logger.ts";
import { createRedis, redisKeys } from "../src/redis/connect.ts";
import { deleteRedisPrefix } from "../test/support/index.ts";
import { runLostNothing } from "../test/support/lost-nothing.ts";
import { freePort, waitHttp } from "./lib/net.ts";
import { waitForQuietMachine } from "./lib/quiet.ts";
import { createShop } from "./lib/shop.ts";
import { accessToken } from "./lib/token.ts";
import { exitOnHelp } from "./lib/usage.ts";
import { wrkSummary } from "./lib/wrk.ts";

exitOnHelp(`bun bench/feed.ts [options]   (see bench/README.md; sizes: the BENCH_* variables in its header)
  --mode A,B         phases, comma-separated: ingest, read, lost, empty-poll (ingest,read,lost; BENCH_PHASES)
  --per-webhook N    messages per inbound webhook (1; BENCH_PER_WEBHOOK)`);

const { values: flags } = parseArgs({
  args: process.argv.slice(2),
  strict: true,
  options: {
    mode: { type: "string", default: process.env.BENCH_PHASES ?? "ingest,read,lost" },
    "per-webhook": { type: "string", default: process.env.BENCH_PER_WEBHOOK ?? "1" },
  },
});
const INGEST_RATE = Number(process.env.BENCH_INGEST_RATE ?? 3000);
const INGEST_SECONDS = Number(process.env.BENCH_INGEST_SECONDS ?? 10);
const MESSAGES_PER_WEBHOOK = Number(flags["per-webhook"]);
// One message per webhook needs many webhooks in flight to offer thousands of messages a second.
const WEBHOOKS_IN_FLIGHT = Number(process.env.BENCH_WEBHOOKS_IN_FLIGHT ?? 64);
const FINALIZE_WORKERS = Number(process.env.BENCH_FINALIZE_WORKERS ?? 2);
const FEED_MESSAGES = Number(process.env.BENCH_FEED_MESSAGES ?? 200_000);
const LOST_WRITERS = Number(process.env.BENCH_LOST_WRITERS ?? 16);
const LOST_PER_WRITER = Number(process.env.BENCH_LOST_PER_WRITER ?? 1500);
const POLL_CONNECTIONS = Number(process.env.BENCH_POLL_CONNECTIONS ?? 64);
const POLL_SECONDS = Number(process.env.BENCH_POLL_SECONDS ?? 20);
const POLL_WARMUP_SECONDS = 3;
const PHASES = new Set(flags.mode.split(","));
const KNOWN_PHASES = ["ingest", "read", "empty-poll", "lost"];
if (![...PHASES].every((phase) => KNOWN_PHASES.includes(phase)))
  throw new Error(`--mode / BENCH_PHASES: phases among ${KNOWN_PHASES.join(",")}`);
if (!Number.isInteger(MESSAGES_PER_WEBHOOK) || MESSAGES_PER_WEBHOOK < 1)
  throw new Error("--per-webhook must be a positive integer");
// Every wait below ends by itself.
const VISIBILITY_DEADLINE_MS = 120_000;

const suffix = randomBase62(8).toLowerCase();
const port = freePort();
const env = {
  // The development defaults (webhook secret, JWT key) unless NODE_ENV is set.
  NODE_ENV: process.env.NODE_ENV || "development",
  DATABASE_URL: `postgres://postgres@127.0.0.1:5432/bench_feed_${suffix}`,
  REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379/0",
  REDIS_PREFIX: `bench-${suffix}`,
  PORT: String(port),
  PUBLIC_BASE_URL: `http://127.0.0.1:${port}/v2`,
  // Nothing is sent in this benchmark; the provider is never called.
  WHATSAPP_GRAPH_URL: "http://127.0.0.1:9",
  LOG_LEVEL: "warn",
  // The sequencer's shards, for the worker processes and the lost-nothing loops (one loop per shard).
  FEED_SHARDS: process.env.BENCH_FEED_SHARDS ?? "1",
};
const config = loadConfig(env);
const base = `http://127.0.0.1:${port}`;

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

const children: ReturnType<typeof Bun.spawn>[] = [];
function spawn(command: string[]) {
  const child = Bun.spawn(command, { env: { ...process.env, ...env }, stdout: "inherit", stderr: "inherit" });
  children.push(child);
  return child;
}

interface Tenant {
  tenantId: string;
  senderId: string;
  phoneNumberId: string;
  token: string;
}

async function benchTenant(db: Db, name: string, phoneNumberId: string): Promise<Tenant> {
  const shop = await createShop(db, config.providerTokenKey, {
    name,
    apps: { name: `${name} reader`, readLimit: 1_000_000, sendLimit: 1_000 },
    sender: {
      phoneNumber: `+1555${phoneNumberId.slice(-7)}`,
      providerPhoneNumberId: phoneNumberId,
      wabaId: "300000000000001",
    },
  });
  const token = await accessToken(base, shop.apps[0]!);
  return { tenantId: shop.tenantId, senderId: shop.senderId!, phoneNumberId, token };
}

interface FeedPage {
  data: { id: string; text: string | null }[];
  has_more: boolean;
  next_cursor: string;
}

async function readFeedPage(token: string, since: string | undefined, limit: number): Promise<FeedPage> {
  const query = new URLSearchParams({ limit: String(limit), ...(since && { since }) });
  const response = await fetch(`${base}/v2/messages?${query}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  if (response.status !== 200) throw new Error(`feed read: ${response.status} ${await response.text()}`);
  return (await response.json()) as FeedPage;
}

function webhook(tenant: Tenant, first: number, count: number, timestamp: number): string {
  const messages = Array.from({ length: count }, (_, i) => {
    const n = first + i;
    return {
      from: `4917${String(n % 500).padStart(9, "0")}`,
      id: `wamid.bench.${suffix}.${n}`,
      timestamp: String(timestamp),
      type: "text" as const,
      text: { body: `bench ${n}` },
    };
  });
  const account = {
    wabaId: "300000000000001",
    phoneNumberId: tenant.phoneNumberId,
    displayPhoneNumber: "15550100001",
  };
  const contacts = messages.map((m) => ({ profile: { name: "Bench" }, wa_id: m.from }));
  return JSON.stringify(buildWebhook(account, { contacts, messages }));
}

/** (a) Open loop at INGEST_RATE for INGEST_SECONDS, while one reader follows the feed. */
async function ingest(tenant: Tenant) {
  const total = INGEST_RATE * INGEST_SECONDS;
  const webhooks = Math.ceil(total / MESSAGES_PER_WEBHOOK);
  const ackedAt = new Float64Array(total).fill(Number.NaN);
  const seenAt = new Float64Array(total).fill(Number.NaN);
  let seen = 0;

  const reader = (async () => {
    let since: string | undefined;
    const deadline = performance.now() + INGEST_SECONDS * 1000 + VISIBILITY_DEADLINE_MS;
    while (seen < total && performance.now() < deadline) {
      const page = await readFeedPage(tenant.token, since, 500);
      const now = performance.now();
      for (const message of page.data) {
        const n = Number(message.text?.slice("bench ".length));
        if (Number.isInteger(n) && n < total && Number.isNaN(seenAt[n]!)) {
          seenAt[n] = now;
          seen++;
        }
      }
      since = page.next_cursor;
      if (!page.has_more) await Bun.sleep(5);
    }
  })();

  const started = performance.now();
  const interval = (1000 * MESSAGES_PER_WEBHOOK) / INGEST_RATE;
  let next = 0;
  let failures = 0;
  const sender = async () => {
    for (;;) {
      const index = next++;
      if (index >= webhooks) return;
      // Paced: webhook i leaves at i * interval, or as soon as a slot frees up if behind.
      const due = started + index * interval;
      const wait = due - performance.now();
      if (wait > 0) await Bun.sleep(wait);
      const first = index * MESSAGES_PER_WEBHOOK;
      const count = Math.min(MESSAGES_PER_WEBHOOK, total - first);
      const raw = webhook(tenant, first, count, Math.floor(Date.now() / 1000));
      const response = await fetch(`${base}/webhooks/whatsapp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "x-hub-signature-256": signPayload(raw, config.whatsappAppSecret),
        },
        body: raw,
      });
      await response.arrayBuffer();
      if (response.status !== 200) {
        failures++;
        continue;
      }
      const now = performance.now();
      for (let n = first; n < first + count; n++) ackedAt[n] = now;
    }
  };
  await Promise.all(Array.from({ length: WEBHOOKS_IN_FLIGHT }, sender));
  const sentSeconds = (performance.now() - started) / 1000;
  await reader;

  const latencies: number[] = [];
  let lastSeen = started;
  for (let n = 0; n < total; n++) {
    const acked = ackedAt[n]!;
    const visible = seenAt[n]!;
    if (!Number.isNaN(visible)) lastSeen = Math.max(lastSeen, visible);
    // A message can show up before its webhook's 200 reaches us; that counts as 0.
    if (!Number.isNaN(acked) && !Number.isNaN(visible)) latencies.push(Math.max(0, visible - acked));
  }
  latencies.sort((a, b) => a - b);
  return {
    offered_msgs_per_s: INGEST_RATE,
    messages: total,
    messages_per_webhook: MESSAGES_PER_WEBHOOK,
    finalize_workers: FINALIZE_WORKERS,
    webhook_failures: failures,
    accepted_msgs_per_s: round(total / sentSeconds, 0),
    visible: seen,
    sustained_visible_msgs_per_s: round(seen / ((lastSeen - started) / 1000), 0),
    visibility_ms: {
      p50: round(percentile(latencies, 50)),
      p99: round(percentile(latencies, 99)),
      max: round(percentile(latencies, 100)),
    },
  };
}

/** (b) Seed FEED_MESSAGES messages, number them, and read the whole feed from the start. */
async function feedRead(db: Db, heads: FeedHeadWriter, tenant: Tenant) {
  const contacts = 1000;
  await sql`
    INSERT INTO contacts (id, tenant_id, phone, name)
    SELECT 'ctc_bench' || lpad(g::text, 8, '0'), ${tenant.tenantId}, '+4916' || lpad(g::text, 9, '0'), 'Customer ' || g
    FROM generate_series(1, ${contacts}) AS g`.execute(db);
  await sql`
    INSERT INTO messages (id, tenant_id, contact_id, sender_id, direction, type, preview, text, status, created_at)
    SELECT 'msg_bench' || lpad(g::text, 10, '0'), ${tenant.tenantId},
           'ctc_bench' || lpad((g % ${contacts} + 1)::text, 8, '0'), ${tenant.senderId},
           CASE WHEN g % 4 = 0 THEN 'outbound' ELSE 'inbound' END, 'text',
           'Message ' || g || ': where is my order? It was due yesterday.',
           'Message ' || g || ': where is my order? It was due yesterday.',
           CASE WHEN g % 4 = 0 THEN 'delivered' END,
           now() - make_interval(secs => ${FEED_MESSAGES} - g)
    FROM generate_series(1, ${FEED_MESSAGES}) AS g`.execute(db);
  await sql`INSERT INTO feed_pending (message_id, tenant_id)
            SELECT id, tenant_id FROM messages WHERE tenant_id = ${tenant.tenantId}`.execute(db);
  const sequencingStarted = performance.now();
  // The api's workers are stopped by now: this process's sequencer numbers the whole backlog.
  for (let ticks = 0; ticks < 10_000 && (await sequenceFeed(db, undefined, heads)).taken > 0; ticks++);
  const sequencingSeconds = (performance.now() - sequencingStarted) / 1000;
  await sql`ANALYZE`.execute(db);

  const read = async () => {
    const pageMs: number[] = [];
    let since: string | undefined;
    let messages = 0;
    const started = performance.now();
    for (let pages = 0; pages < FEED_MESSAGES; pages++) {
      const pageStarted = performance.now();
      const page = await readFeedPage(tenant.token, since, 500);
      pageMs.push(performance.now() - pageStarted);
      messages += page.data.length;
      since = page.next_cursor;
      if (!page.has_more) break;
    }
    return { messages, seconds: (performance.now() - started) / 1000, pageMs: pageMs.sort((a, b) => a - b) };
  };
  await read(); // warm-up: caches, JIT
  const measured = await read();
  return {
    messages: measured.messages,
    sequencer_msgs_per_s: round(FEED_MESSAGES / sequencingSeconds, 0),
    read_msgs_per_s: round(measured.messages / measured.seconds, 0),
    page_ms: {
      p50: round(percentile(measured.pageMs, 50), 2),
      p99: round(percentile(measured.pageMs, 99), 2),
      max: round(percentile(measured.pageMs, 100), 2),
    },
  };
}

/** Postgres transactions of the benchmark's database so far (the server's statistics: ~1 s behind). */
async function databaseTransactions(db: Db): Promise<number> {
  const row = await sql<{ n: number }>`
    SELECT (xact_commit + xact_rollback)::float8 AS n FROM pg_stat_database
    WHERE datname = current_database()`.execute(db);
  return row.rows[0]?.n ?? 0;
}

interface PollRun {
  client: string;
  pollsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non200: number;
  polls: number;
}

/** wrk's `--latency` figures, in ms. */
function wrkFigures(output: string): Omit<PollRun, "client"> {
  const summary = wrkSummary(output);
  return {
    pollsPerSecond: summary.requestsPerSecond,
    p50Ms: summary.latencyMs(50),
    p99Ms: summary.latencyMs(99),
    non200: summary.non2xx,
    polls: summary.requests,
  };
}

/** POLL_CONNECTIONS connections polling `url` for `seconds`: wrk when installed, else fetch loops here. */
async function pollFor(url: string, token: string, seconds: number): Promise<PollRun> {
  const wrk = Bun.which("wrk");
  if (wrk) {
    const child = Bun.spawn(
      [
        wrk,
        "-t2",
        `-c${POLL_CONNECTIONS}`,
        `-d${seconds}s`,
        "--latency",
        "-H",
        `Authorization: Bearer ${token}`,
        url,
      ],
      { stdout: "pipe", stderr: "inherit" },
    );
    const output = await new Response(child.stdout).text();
    if ((await child.exited) !== 0) throw new Error(`wrk failed: ${output}`);
    return { client: "wrk -t2", ...wrkFigures(output) };
  }
  const latencies: number[] = [];
  let non200 = 0;
  const started = performance.now();
  const stopAt = started + seconds * 1000;
  const connection = async () => {
    while (performance.now() < stopAt) {
      const sent = performance.now();
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      await response.arrayBuffer();
      latencies.push(performance.now() - sent);
      if (response.status !== 200) non200++;
    }
  };
  await Promise.all(Array.from({ length: POLL_CONNECTIONS }, connection));
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    client: "fetch in the bench process (no wrk installed; it shares the CPUs)",
    pollsPerSecond: latencies.length / elapsed,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    non200,
    polls: latencies.length,
  };
}

/**
 * (c) Empty polls: a tenant with a few numbered messages (its head raised in Redis as the sequencer
 * does), a cursor at its end, and POLL_CONNECTIONS connections polling with it.
 */
async function emptyPoll(db: Db, heads: FeedHeadWriter, tenant: Tenant) {
  const messages = 100;
  await sql`
    INSERT INTO contacts (id, tenant_id, phone) VALUES ('ctc_poll1', ${tenant.tenantId}, '+4916000000001')`.execute(
    db,
  );
  await sql`
    INSERT INTO messages (id, tenant_id, contact_id, direction, type, preview, text, created_at)
    SELECT 'msg_poll' || lpad(g::text, 6, '0'), ${tenant.tenantId}, 'ctc_poll1', 'inbound', 'text',
           'poll ' || g, 'poll ' || g, now()
    FROM generate_series(1, ${messages}) AS g`.execute(db);
  await sql`INSERT INTO feed_pending (message_id, tenant_id)
            SELECT id, tenant_id FROM messages WHERE tenant_id = ${tenant.tenantId}`.execute(db);
  while ((await sequenceFeed(db, undefined, heads)).taken > 0);
  const head = parseFeedHead(await heads.redis.get(heads.keys.feedHead(tenant.tenantId)));
  if (head?.seq !== messages) throw new Error(`the head was not raised in Redis: ${JSON.stringify(head)}`);

  let cursor: string | undefined;
  for (
    let page = await readFeedPage(tenant.token, cursor, 500);
    ;
    page = await readFeedPage(tenant.token, cursor, 500)
  ) {
    cursor = page.next_cursor;
    if (!page.has_more) break;
  }
  const check = await readFeedPage(tenant.token, cursor, 100);
  if (check.data.length > 0 || check.next_cursor !== cursor)
    throw new Error("a poll at the head was not empty");

  const url = `${base}/v2/messages?since=${cursor}`;
  await pollFor(url, tenant.token, POLL_WARMUP_SECONDS);
  const transactionsBefore = await databaseTransactions(db);
  const run = await pollFor(url, tenant.token, POLL_SECONDS);
  await Bun.sleep(1500); // the server's statistics lag
  const transactions = (await databaseTransactions(db)) - transactionsBefore - 1;
  return {
    client: run.client,
    connections: POLL_CONNECTIONS,
    seconds: POLL_SECONDS,
    polls_per_s: round(run.pollsPerSecond, 0),
    latency_ms: { p50: round(run.p50Ms, 2), p99: round(run.p99Ms, 2) },
    non_200: run.non200,
    postgres_xacts_per_poll: round(Math.max(0, transactions) / Math.max(1, run.polls), 3),
  };
}

/** (d) The lost-nothing run at a large size, through an in-process app on the same database. */
async function lostNothing(db: Db) {
  const deps = buildDeps(config, { logger: createLogger("silent"), limits: { token: 1000 } });
  const app = createApp(deps);
  try {
    const tenants = [];
    for (const name of ["Lost A", "Lost B"]) {
      const shop = await createShop(db, config.providerTokenKey, {
        name,
        apps: { name: "Lost reader", readLimit: 1_000_000 },
        sender: {
          phoneNumber: "+15550109999",
          providerPhoneNumberId: `lost-${name}-${suffix}`,
          wabaId: "300000000000009",
        },
      });
      const contact = await db
        .insertInto("contacts")
        .values({ id: newId("ctc"), tenant_id: shop.tenantId, phone: "+4915100000001" })
        .returning("id")
        .executeTakeFirstOrThrow();
      const token = await accessToken("http://localhost", shop.apps[0]!, {
        handle: (request) => app.handle(request),
      });
      tenants.push({ tenantId: shop.tenantId, senderId: shop.senderId!, contactId: contact.id, token });
    }
    const writerDb = createDb(config.databaseUrl, { max: LOST_WRITERS + 6 });
    try {
      const report = await runLostNothing({
        app,
        db: writerDb,
        logger: createLogger("silent"),
        tenants,
        writers: LOST_WRITERS,
        messagesPerWriter: LOST_PER_WRITER,
        readersPerTenant: 2,
        rollbackRate: 0.1,
        maxDelayMs: 5,
        sequencers: Math.max(2, config.workers.feedShards),
        shards: config.workers.feedShards,
      });
      return {
        writers: LOST_WRITERS,
        shards: config.workers.feedShards,
        committed: report.committed,
        rolled_back: report.rolledBack,
        lost: report.lost,
        rereads_exact: report.rereadsExact,
        readers_in_reread_order: report.readers.every((r) => r.orderMatchesReread),
        foreign_seen: report.readers.reduce((sum, r) => sum + r.foreign + r.rolledBackSeen, 0),
        seconds: report.seconds,
      };
    } finally {
      await writerDb.destroy();
    }
  } finally {
    await closeDeps(deps);
  }
}

const QUIET_WAIT_SECONDS = Number(process.env.BENCH_QUIET_WAIT_SECONDS ?? 600);
const quiet = async (phase: string) => {
  if (!(await waitForQuietMachine(QUIET_WAIT_SECONDS)))
    console.log(JSON.stringify({ warning: `machine busy before ${phase}` }));
};

await ensureDatabase(config.databaseUrl);
const db = createDb(config.databaseUrl, { max: 4 });
// This process numbers the seeded backlogs itself, raising heads in Redis as the workers' loops do.
const headsRedis = createRedis(config.redisUrl);
const heads = createFeedHeadWriter(headsRedis, redisKeys(config.redisPrefix));
try {
  await migrate(db);
  if (PHASES.has("ingest") || PHASES.has("read") || PHASES.has("empty-poll")) {
    const api = spawn(["bun", "src/server.ts"]);
    await waitHttp(`${base}/healthz`, "the api");
    if (PHASES.has("ingest")) {
      const workers = Array.from({ length: FINALIZE_WORKERS }, () => spawn(["bun", "workers/finalize.ts"]));
      await Bun.sleep(1500); // workers connect to Redis and Postgres
      const ingestTenant = await benchTenant(db, "Ingest", "310000000000001");
      await quiet("ingest");
      console.log(JSON.stringify({ ingest: await ingest(ingestTenant) }));
      for (const worker of workers) worker.kill("SIGTERM");
      await Promise.all(workers.map((worker) => worker.exited));
    }
    if (PHASES.has("read")) {
      const readTenant = await benchTenant(db, "Reader", "310000000000002");
      await quiet("feed read");
      console.log(JSON.stringify({ feed_read: await feedRead(db, heads, readTenant) }));
    }
    if (PHASES.has("empty-poll")) {
      const pollTenant = await benchTenant(db, "Poller", "310000000000003");
      await quiet("empty poll");
      console.log(JSON.stringify({ empty_poll: await emptyPoll(db, heads, pollTenant) }));
    }
    api.kill("SIGTERM");
    await api.exited;
  }
  if (PHASES.has("lost")) {
    await quiet("lost-nothing");
    console.log(JSON.stringify({ lost_nothing: await lostNothing(db) }));
  }
} finally {
  for (const child of children) if (child.exitCode === null) child.kill("SIGTERM");
  await Promise.all(children.map((child) => child.exited));
  await db.destroy();
  headsRedis.disconnect();
  await dropDatabase(config.databaseUrl);
  await deleteRedisPrefix(config.redisPrefix);
}
