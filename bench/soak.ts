/**
 * Soak benchmark (issue 25): the whole service (`scripts/start.ts`: simulator, workers, api) for a
 * long run at a steady rate end to end, customers replying, the simulator posting every status, and
 * the tenant's retention short (minutes) so old rows are removed all along. Each minute: RSS of every
 * process, table and index bytes per live message, dead tuples and autovacuum runs, send latency
 * percentiles. At the end: every accepted send reached the provider exactly once and the feed once,
 * every reply reached the feed once; and each series flat (no upward trend after the first minutes).
 *
 *   bun bench/soak.ts                           # 30 minutes at 500 sends/s, retention 5 minutes
 *   bun bench/soak.ts --minutes 8 --rate 300    # a shorter look
 *
 * Its own PostgreSQL (scripts/private-postgres.ts, in a temporary folder, removed after): the shared
 * server of this machine runs with autovacuum off (a CI setting), and a soak without vacuum measures
 * bloat, not the service. This one has autovacuum on at PostgreSQL's defaults (the tables' own
 * settings come from the migrations, sql/025). Its own Redis prefix (bench-soak), deleted after.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { sql } from "kysely";
import { findPgTools, freePort as freePgPort, privatePostgres } from "../scripts/private-postgres.ts";
import { loadConfig } from "../src/config.ts";
import { createDb, ensureDatabase } from "../src/db/connect.ts";
import { migrate } from "../src/db/migrate.ts";
import { deleteInstanceKeys } from "../src/queues/instance-keys.ts";
import { setMessageRetention } from "../src/tenants/repository.ts";
import { fmt, quantile, row, say } from "./lib/format.ts";
import { freePort, waitHttp } from "./lib/net.ts";
import { waitForQuietMachine } from "./lib/quiet.ts";
import { createShop } from "./lib/shop.ts";
import { REDIS_URL } from "./lib/stores.ts";
import { accessToken } from "./lib/token.ts";

const { values: flags } = parseArgs({
  options: {
    minutes: { type: "string", default: "30" },
    rate: { type: "string", default: "500" },
    "inbound-rate": { type: "string", default: "25" },
    "retention-minutes": { type: "string", default: "5" },
    "send-workers": { type: "string", default: "2" },
    "wait-quiet": { type: "string", default: "0" },
    help: { type: "boolean", short: "h", default: false },
  },
});
if (flags.help) {
  console.log(`bun bench/soak.ts [options]
  --minutes N            length of the run (30)
  --rate N               sends per second, POST /v2/messages (500)
  --inbound-rate N       customer replies per second through the simulator (25)
  --retention-minutes N  the tenant's message retention (5)
  --send-workers N       send worker processes (2)
  --wait-quiet S         first wait up to S s for a quiet machine (0)`);
  process.exit(0);
}
const num = (name: keyof typeof flags) => {
  const value = Number(flags[name]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a positive number`);
  return value;
};
const opts = {
  minutes: num("minutes"),
  rate: num("rate"),
  inboundRate: num("inbound-rate"),
  retentionMinutes: num("retention-minutes"),
  sendWorkers: num("send-workers"),
  waitQuiet: Number(flags["wait-quiet"]),
};

const REDIS_PREFIX = "bench-soak";

// ---------------------------------------------------------------------------------------------
// Processes: the service's own start script; RSS by role from /proc.

const ROLES: [RegExp, string][] = [
  [/src\/server\.ts/, "api"],
  [/workers\/send\.ts/, "send"],
  [/workers\/status\.ts/, "status"],
  [/workers\/finalize\.ts/, "finalize"],
  [/workers\/maintenance\.ts/, "maintenance"],
  [/workers\/webhook\.ts/, "webhook"],
  [/simulator\/server\.ts/, "simulator"],
];

function descendants(pid: number): number[] {
  const out: number[] = [];
  const visit = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children = "";
      try {
        children = readFileSync(`/proc/${p}/task/${task}/children`, "utf8");
      } catch {}
      for (const child of children.split(/\s+/).filter(Boolean).map(Number)) {
        out.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return out;
}

/** Resident MB per role (the largest process of a role with several: each must stay flat). */
function rssByRole(root: number): Record<string, number> {
  const rss: Record<string, number> = {};
  for (const pid of descendants(root)) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      const role = ROLES.find(([pattern]) => pattern.test(cmdline))?.[1];
      if (!role) continue;
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
      rss[role] = Math.max(rss[role] ?? 0, kb / 1024);
    } catch {}
  }
  return rss;
}

// ---------------------------------------------------------------------------------------------

interface Minute {
  minute: number;
  sends: number;
  failedRequests: number;
  p50: number;
  p99: number;
  providerSends: number;
  rss: Record<string, number>;
  liveMessages: number;
  totalMb: number;
  bytesPerMessage: number;
  deadTuples: number;
  autovacuums: number;
  eventPartitions: number;
}

const GROWING_TABLES = [
  "messages",
  "feed_entries",
  // events: partitioned, its partitions are counted by the query below (the parent holds nothing).
  "idempotency_keys",
  "conversations",
  "contacts",
  "inbound_events",
  "status_events",
  "feed_pending",
  "event_pending",
];

async function main() {
  if (opts.waitQuiet > 0 && !(await waitForQuietMachine(opts.waitQuiet)))
    say(`WARNING: the machine did not become quiet within ${opts.waitQuiet} s`);
  const tools = findPgTools();
  if ("problem" in tools) throw new Error(tools.problem);
  const home = mkdtempSync(join(tmpdir(), "bench-soak-"));
  const postgres = privatePostgres({
    tools,
    home: join(home, "pg"),
    port: freePgPort(),
    commandLog: join(home, "commands.log"),
    settings: ["max_connections=200", "shared_buffers=128MB", "autovacuum=on"],
  });
  await postgres.init();
  await postgres.start();
  const DATABASE_URL = postgres.url("soak");
  await ensureDatabase(DATABASE_URL);
  await deleteInstanceKeys(REDIS_URL, REDIS_PREFIX);
  const db = createDb(DATABASE_URL, { max: 3, applicationName: "bench" });
  await migrate(db);

  const ports = { api: freePort(), simulator: freePort() };
  const apiUrl = `http://127.0.0.1:${ports.api}`;
  const simulatorUrl = `http://127.0.0.1:${ports.simulator}`;
  const env: Record<string, string | undefined> = {
    ...process.env,
    NODE_ENV: "development",
    PORT: String(ports.api),
    PUBLIC_BASE_URL: `${apiUrl}/v2`,
    DATABASE_URL,
    REDIS_URL,
    REDIS_PREFIX,
    LOG_LEVEL: "warn",
    // No WHATSAPP_GRAPH_URL: the start script then runs the simulator on SIMULATOR_PORT.
    WHATSAPP_GRAPH_URL: undefined,
    SIMULATOR_PORT: String(ports.simulator),
    SIMULATOR_WEBHOOK_URL: `${apiUrl}/webhooks/whatsapp`,
    SIMULATOR_STATUS_DELAY_MS: "20",
    SEND_WORKERS: String(opts.sendWorkers),
    // Retention runs often enough to keep the window short; the sweeper at its default.
    RETENTION_INTERVAL_MS: "15000",
    // The event log's partitions a minute wide: with retention at minutes they are attached and
    // dropped all through the run.
    EVENT_PARTITION_INTERVAL_MS: "60000",
  };
  const service = Bun.spawn(["bun", "scripts/start.ts"], {
    env,
    stdout: Bun.file(join(tmpdir(), `bench-soak-${process.pid}.log`)),
    stderr: "inherit",
  });
  const stop = async () => {
    service.kill("SIGTERM");
    await Promise.race([service.exited, Bun.sleep(15_000)]);
    if (service.exitCode === null) service.kill("SIGKILL");
  };
  process.on("SIGINT", () => void stop().then(() => process.exit(130)));
  try {
    await waitHttp(`${apiUrl}/readyz`, "the api", { timeoutMs: 120_000, intervalMs: 200 });
    await waitHttp(`${simulatorUrl}/_sim/health`, "the simulator", { timeoutMs: 60_000, intervalMs: 200 });

    const phoneNumberId = "100000000000077";
    const shop = await createShop(db, loadConfig(env).providerTokenKey, {
      name: "Soak tenant",
      dailyQuota: 100_000_000,
      apps: { name: "soak", sendLimit: 100_000, readLimit: 100_000 },
      sender: {
        name: "Soak sender",
        phoneNumber: "+15550107777",
        providerPhoneNumberId: phoneNumberId,
        wabaId: "200000000000077",
        mps: 100_000,
        simulatorUrl,
      },
    });
    await setMessageRetention(db, shop.tenantId, opts.retentionMinutes / 1440);
    const credentials = shop.apps[0]!;
    let token = await accessToken(apiUrl, credentials);
    const refreshToken = async () => {
      token = await accessToken(apiUrl, credentials);
    };

    // --- the load: sends at a fixed rate, replies, a feed follower, a provider follower
    const CONTACTS = 20_000;
    const accepted = new Map<string, number>(); // msg id -> 0
    const feedOut = new Map<string, number>();
    const feedIn = new Map<string, number>();
    const providerSends = new Map<string, number>();
    const repliesSent = new Set<string>();
    let latencies: number[] = [];
    let failedRequests = 0;
    let inFlight = 0;
    let skipped = 0;
    let running = true;
    const t0 = performance.now();
    let fired = 0;
    let counter = 0;

    const sendOne = async () => {
      const n = counter++;
      inFlight++;
      const started = performance.now();
      try {
        const response = await fetch(`${apiUrl}/v2/messages`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({
            to: `+4915${String(n % CONTACTS).padStart(8, "0")}`,
            template: { name: "order_shipped", language: "en", variables: { body: ["Ana", `S-${n}`] } },
          }),
        });
        const body = (await response.json()) as { id?: string };
        latencies.push(performance.now() - started);
        if (response.status === 201 && body.id) accepted.set(body.id, 0);
        else {
          failedRequests++;
          if (response.status === 401) await refreshToken();
        }
      } catch {
        failedRequests++;
      } finally {
        inFlight--;
      }
    };
    const loadLoop = (async () => {
      while (running) {
        const due = Math.floor(((performance.now() - t0) / 1000) * opts.rate) - fired;
        for (let i = 0; i < due; i++) {
          fired++;
          if (inFlight >= 256) skipped++;
          else void sendOne();
        }
        await Bun.sleep(5);
      }
    })();

    let replies = 0;
    const replyLoop = (async () => {
      while (running) {
        const due = Math.floor(((performance.now() - t0) / 1000) * opts.inboundRate) - replies;
        for (let i = 0; i < due; i++) {
          const text = `soak-in-${replies++}`;
          repliesSent.add(text);
          void fetch(`${simulatorUrl}/_sim/inbound`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({
              phone_number_id: phoneNumberId,
              type: "text",
              text,
              from: `4915${String(replies % CONTACTS).padStart(8, "0")}`,
            }),
          }).catch(() => repliesSent.delete(text));
        }
        await Bun.sleep(50);
      }
    })();

    let feedCursor: string | undefined;
    let following = true;
    const feedLoop = (async () => {
      while (following) {
        try {
          const query = feedCursor ? `?limit=500&since=${encodeURIComponent(feedCursor)}` : "?limit=500";
          const response = await fetch(`${apiUrl}/v2/messages${query}`, {
            headers: { authorization: `Bearer ${token}` },
          });
          if (response.status === 401) {
            await refreshToken();
            continue;
          }
          const page = (await response.json()) as {
            data: { id: string; direction: string; text: string | null }[];
            has_more: boolean;
            next_cursor: string;
          };
          for (const m of page.data) {
            if (m.direction === "outbound") feedOut.set(m.id, (feedOut.get(m.id) ?? 0) + 1);
            else if (m.text?.startsWith("soak-in-")) feedIn.set(m.text, (feedIn.get(m.text) ?? 0) + 1);
          }
          feedCursor = page.next_cursor;
          if (!page.has_more) await Bun.sleep(500);
        } catch {
          await Bun.sleep(500);
        }
      }
    })();

    let providerPosition = 0;
    let providerFellBehind = 0;
    const followProvider = async () => {
      const response = await fetch(`${simulatorUrl}/_sim/sent?from=${providerPosition}`);
      const page = (await response.json()) as {
        data: { payload: { biz_opaque_callback_data?: string } }[];
        forgotten: number;
        total: number;
      };
      if (page.forgotten > providerPosition) providerFellBehind += page.forgotten - providerPosition;
      for (const record of page.data) {
        const id = record.payload.biz_opaque_callback_data ?? "(none)";
        providerSends.set(id, (providerSends.get(id) ?? 0) + 1);
      }
      providerPosition = page.total;
    };
    const providerLoop = (async () => {
      while (following) {
        await followProvider().catch(() => {});
        await Bun.sleep(2000);
      }
    })();

    // --- the minutes
    const minutes: Minute[] = [];
    let autovacuumsBefore = 0;
    let providerBefore = 0;
    let acceptedBefore = 0;
    say(
      `soak: ${opts.minutes} min at ${opts.rate} sends/s and ${opts.inboundRate} replies/s, retention ${opts.retentionMinutes} min`,
    );
    console.log(
      "  min  sends/s  p50 ms  p99 ms  provider/s  api MB  send MB  status MB  finalize MB  maint MB  sim MB  live msgs  tables MB  bytes/msg  dead tuples  autovacuums  event parts",
    );
    for (let minute = 1; minute <= opts.minutes; minute++) {
      await Bun.sleep(Math.max(0, t0 + minute * 60_000 - performance.now()));
      const window = latencies.sort((a, b) => a - b);
      latencies = [];
      const q = (p: number) => quantile(window, p);
      // The event log is partitioned: its partitions count, the partitioned parent holds nothing.
      const sizes = await sql<{ bytes: string; dead: string; vacuums: string; partitions: number }>`
        SELECT sum(pg_total_relation_size(relid))::text AS bytes, sum(n_dead_tup)::text AS dead,
               sum(autovacuum_count + autoanalyze_count)::text AS vacuums,
               (SELECT count(*)::int FROM pg_partition_tree('events') WHERE isleaf) AS partitions
        FROM pg_stat_user_tables
        WHERE relname = ANY(${GROWING_TABLES})
           OR relid IN (SELECT relid FROM pg_partition_tree('events') WHERE isleaf)`.execute(db);
      const live = await sql<{ n: number }>`
        SELECT count(*)::int AS n FROM messages WHERE tenant_id = ${shop.tenantId}`.execute(db);
      const stats = sizes.rows[0];
      const liveMessages = live.rows[0]?.n ?? 0;
      const bytes = Number(stats?.bytes ?? 0);
      const vacuums = Number(stats?.vacuums ?? 0);
      const sample: Minute = {
        minute,
        sends: (accepted.size - acceptedBefore) / 60,
        failedRequests,
        p50: q(0.5),
        p99: q(0.99),
        providerSends: (providerSends.size - providerBefore) / 60,
        rss: rssByRole(service.pid),
        liveMessages,
        totalMb: bytes / 1048576,
        bytesPerMessage: liveMessages > 0 ? bytes / liveMessages : Number.NaN,
        deadTuples: Number(stats?.dead ?? 0),
        autovacuums: vacuums - autovacuumsBefore,
        eventPartitions: stats?.partitions ?? 0,
      };
      acceptedBefore = accepted.size;
      providerBefore = providerSends.size;
      autovacuumsBefore = vacuums;
      minutes.push(sample);
      const r = sample.rss;
      console.log(
        row([
          [minute, 5],
          [fmt(sample.sends), 8],
          [fmt(sample.p50, 1), 7],
          [fmt(sample.p99, 1), 7],
          [fmt(sample.providerSends), 11],
          [fmt(r.api ?? Number.NaN), 7],
          [fmt(r.send ?? Number.NaN), 8],
          [fmt(r.status ?? Number.NaN), 10],
          [fmt(r.finalize ?? Number.NaN), 12],
          [fmt(r.maintenance ?? Number.NaN), 9],
          [fmt(r.simulator ?? Number.NaN), 7],
          [fmt(liveMessages), 10],
          [fmt(sample.totalMb, 1), 10],
          [fmt(sample.bytesPerMessage), 10],
          [fmt(sample.deadTuples), 12],
          [fmt(sample.autovacuums), 12],
          [fmt(sample.eventPartitions), 12],
        ]),
      );
    }

    // --- the end: stop the load, let everything arrive, count
    running = false;
    await Promise.all([loadLoop, replyLoop]);
    const deadline = Date.now() + 120_000;
    while (Date.now() < deadline) {
      await followProvider().catch(() => {});
      const settled =
        inFlight === 0 &&
        [...accepted.keys()].every((id) => providerSends.has(id) && feedOut.has(id)) &&
        [...repliesSent].every((text) => feedIn.has(text));
      if (settled) break;
      await Bun.sleep(2000);
    }
    following = false;
    await Promise.all([feedLoop, providerLoop]);

    const dup = (m: Map<string, number>) => [...m.values()].reduce((sum, n) => sum + Math.max(0, n - 1), 0);
    const lostSends = [...accepted.keys()].filter((id) => !providerSends.has(id)).length;
    const lostFeed = [...accepted.keys()].filter((id) => !feedOut.has(id)).length;
    const lostReplies = [...repliesSent].filter((text) => !feedIn.has(text)).length;
    const duplicates = dup(providerSends) + dup(feedOut) + dup(feedIn);
    say(
      `totals: ${fmt(accepted.size)} sends accepted (${fmt(failedRequests)} requests failed, ${fmt(skipped)} not fired: 256 in flight), ` +
        `${fmt(repliesSent.size)} replies; provider follower fell behind by ${fmt(providerFellBehind)}`,
    );

    // Flat: the average of the last five minutes within 10% (plus a small absolute slack) of the
    // average of minutes 6-10, the first five after warming up (shorter runs: halves).
    const warm = Math.min(5, Math.floor(minutes.length / 2));
    const early = minutes.slice(warm, warm + 5);
    const late = minutes.slice(-Math.min(5, minutes.length - warm));
    const avg = (rows: Minute[], pick: (m: Minute) => number) =>
      rows.reduce((sum, m) => sum + pick(m), 0) / Math.max(1, rows.length);
    const series: [string, (m: Minute) => number, number][] = [
      ...["api", "send", "status", "finalize", "maintenance", "simulator"].map(
        (role) =>
          [`${role} RSS MB`, (m: Minute) => m.rss[role] ?? 0, 10] as [string, (m: Minute) => number, number],
      ),
      ["bytes per live message", (m) => m.bytesPerMessage, 200],
      ["table and index MB", (m) => m.totalMb, 5],
      ["p99 ms", (m) => m.p99, 20],
    ];
    const checks = series.map(([name, pick, slack]) => {
      const a = avg(early, pick);
      const b = avg(late, pick);
      const flat = b <= a * 1.1 + slack;
      return { name, flat, line: `${name} ${fmt(a, 1)} -> ${fmt(b, 1)} ${flat ? "flat" : "GROWING"}` };
    });
    const faults = [
      ["lost sends", lostSends],
      ["sends missing from the feed", lostFeed],
      ["lost replies", lostReplies],
      ["duplicates", duplicates],
    ] as const;
    const failed = checks.filter((c) => !c.flat).length + faults.filter(([, n]) => n > 0).length;
    console.log(
      `flatness (minutes ${warm + 1}-${warm + early.length} vs the last ${late.length}): ${checks.map((c) => c.line).join("; ")}`,
    );
    console.log(
      `verdict: ${faults.map(([name, n]) => `${name} ${n}`).join(", ")}; ${checks.filter((c) => c.flat).length} of ${checks.length} series flat -> ${failed === 0 ? "ALL MET" : `${failed} NOT met`}`,
    );
    process.exitCode = failed === 0 ? 0 : 1;
  } finally {
    await stop();
    await db.destroy();
    await postgres.stop("fast").catch(() => {});
    rmSync(home, { recursive: true, force: true });
    await deleteInstanceKeys(REDIS_URL, REDIS_PREFIX).catch(() => {});
  }
}

await main();
