/**
 * Webhook delivery benchmark, run by hand: `bun bench/webhooks.ts [--events N] [--contacts N]
 * [--receiver-ms MS] [--wait-quiet S] [--profile DIR]` (not part of the test suite). Needs the local Postgres and
 * Redis; makes its own database and Redis prefix and drops them at the end. Loopback only.
 *
 * Throughput (issue 22: ≥ 3,000 events/s to one endpoint whose receiver answers in 50 ms): a
 * backlog of `message.received` events over many contacts is put in the event log (rows as the
 * message writer leaves them, numbered by the production sequencer), one endpoint is created and
 * replayed from the start, and a real webhook worker process posts the backlog to a receiver in
 * this process that answers each post after `--receiver-ms`. Printed: events/s, duplicates and
 * events out of order per contact (both must be 0), and the worker's CPU per event.
 */
import { parseArgs } from "node:util";
import { sql } from "kysely";
import { loadConfig } from "../src/config.ts";
import { createDb, dropDatabase, ensureDatabase } from "../src/db/connect.ts";
import { migrate } from "../src/db/migrate.ts";
import { createEventCursorCodec } from "../src/events/cursor.ts";
import { sequenceFeed } from "../src/feed/sequencer.ts";
import { randomBase62 } from "../src/ids.ts";
import { createWebhookEndpoint, replayWebhookEndpoint } from "../src/push/service.ts";
import { createQueues } from "../src/queues/index.ts";
import { deleteRedisPrefix } from "../test/support/index.ts";
import { cpuSeconds } from "./lib/proc.ts";
import { profilerFlags } from "./lib/profile.ts";
import { waitForQuietMachine } from "./lib/quiet.ts";
import { createShop } from "./lib/shop.ts";
import { exitOnHelp } from "./lib/usage.ts";

exitOnHelp(`bun bench/webhooks.ts [options]   (see bench/README.md)
  --events N        events in the backlog (60000)
  --contacts N      contacts they are spread over (2000)
  --receiver-ms MS  how long the receiver takes to answer each post (50)
  --wait-quiet S    first wait up to S s for a quiet machine (0)
  --profile DIR     profile the webhook worker into DIR`);

const { values: flags } = parseArgs({
  args: process.argv.slice(2),
  strict: true,
  options: {
    events: { type: "string", default: "60000" },
    contacts: { type: "string", default: "2000" },
    "receiver-ms": { type: "string", default: "50" },
    "wait-quiet": { type: "string", default: "0" },
    profile: { type: "string" },
  },
});
const EVENTS = Number(flags.events);
const CONTACTS = Number(flags.contacts);
const RECEIVER_MS = Number(flags["receiver-ms"]);
const DEADLINE_MS = 300_000;

const suffix = randomBase62(8).toLowerCase();
const env = {
  NODE_ENV: "development",
  DATABASE_URL: `postgres://postgres@127.0.0.1:5432/bench_webhooks_${suffix}`,
  REDIS_URL: process.env.REDIS_URL ?? "redis://127.0.0.1:6379/0",
  REDIS_PREFIX: `bench-wh-${suffix}`,
  WHATSAPP_GRAPH_URL: "http://127.0.0.1:9",
  LOG_LEVEL: "warn",
};
const config = loadConfig(env);
const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

if (Number(flags["wait-quiet"]) > 0) {
  const quiet = await waitForQuietMachine(Number(flags["wait-quiet"]));
  console.log(quiet ? "machine quiet" : "machine NOT quiet: figures are indicative only");
}

await ensureDatabase(config.databaseUrl);
const db = createDb(config.databaseUrl, { max: 4 });
const queues = createQueues(config, config.redisPrefix, {
  forQueues: true,
  connectionName: "bench-webhooks-queues",
});
let worker: ReturnType<typeof Bun.spawn> | undefined;
let receiver: ReturnType<typeof Bun.serve> | undefined;
/** The worker's connections to the receiver (each a client port): a new one costs a handshake (TLS in service). */
const clientPorts = new Set<number>();
const watchdog = setTimeout(() => {
  console.error("bench/webhooks.ts: watchdog fired");
  worker?.kill("SIGKILL");
  process.exit(2);
}, DEADLINE_MS + 60_000);

try {
  await migrate(db);
  const shop = await createShop(db, config.providerTokenKey, {
    name: "Bench webhooks",
    sender: {
      phoneNumber: "+15550109999",
      providerPhoneNumberId: "109000000009999",
      wabaId: "209000000009999",
    },
  });
  // The backlog: messages and their message.received events as the message writer leaves them.
  await sql`
    INSERT INTO contacts (id, tenant_id, phone, name)
    SELECT 'ctc_bench' || lpad(g::text, 8, '0'), ${shop.tenantId}, '+4916' || lpad(g::text, 9, '0'), 'Customer ' || g
    FROM generate_series(1, ${CONTACTS}) AS g`.execute(db);
  await sql`
    INSERT INTO messages (id, tenant_id, contact_id, sender_id, direction, type, preview, text, created_at)
    SELECT 'msg_bench' || lpad(g::text, 10, '0'), ${shop.tenantId},
           'ctc_bench' || lpad((g % ${CONTACTS} + 1)::text, 8, '0'), ${shop.senderId}, 'inbound', 'text',
           'Where is my order ' || g || '?', 'Where is my order ' || g || '?', now()
    FROM generate_series(1, ${EVENTS}) AS g`.execute(db);
  await sql`
    INSERT INTO event_pending (tenant_id, shard, type, message_id)
    SELECT tenant_id, 0, 'message.received', id FROM messages WHERE tenant_id = ${shop.tenantId} ORDER BY seq`.execute(
    db,
  );
  for (let ticks = 0; ticks < 1000 && (await sequenceFeed(db)).events > 0; ticks++);
  await sql`ANALYZE`.execute(db);

  // The receiver: answers each post after RECEIVER_MS, checks order per contact and duplicates.
  const seen = new Set<string>();
  const lastSeqOfContact = new Map<string, number>();
  let duplicates = 0;
  let outOfOrder = 0;
  let firstAt = 0;
  let lastAt = 0;
  receiver = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request, server) {
      clientPorts.add(server.requestIP(request)?.port ?? 0);
      const body = (await request.json()) as { id: string; data: { id: string; contact: { id: string } } };
      await Bun.sleep(RECEIVER_MS);
      const messageSeq = Number(body.data.id.slice("msg_bench".length));
      const previous = lastSeqOfContact.get(body.data.contact.id) ?? 0;
      if (messageSeq < previous) outOfOrder++;
      lastSeqOfContact.set(body.data.contact.id, messageSeq);
      if (seen.has(body.id)) duplicates++;
      seen.add(body.id);
      firstAt ||= performance.now();
      lastAt = performance.now();
      return new Response(null, { status: 204 });
    },
  });

  const deps = {
    db,
    clock: { now: () => new Date() },
    queues,
    config,
    cursors: createEventCursorCodec(config),
  };
  const endpoint = await createWebhookEndpoint(deps, shop.tenantId, {
    url: `http://127.0.0.1:${receiver.port}/hooks`,
    events: ["message.received"],
  });

  // --profile DIR: the worker under Bun's CPU profiler, its profile (and a Markdown summary) in DIR.
  const profiler = flags.profile ? profilerFlags(flags.profile) : [];
  worker = Bun.spawn(["bun", ...profiler, "workers/webhook.ts"], {
    env: { ...process.env, ...env },
    stdout: "inherit",
    stderr: "inherit",
  });
  await Bun.sleep(1500);
  const cpuBefore = cpuSeconds(worker.pid);
  const started = performance.now();
  await replayWebhookEndpoint(deps, shop.tenantId, endpoint.id, null);
  while (seen.size < EVENTS && performance.now() - started < DEADLINE_MS) await Bun.sleep(100);
  const seconds = (lastAt - started) / 1000;
  const cpu = cpuSeconds(worker.pid) - cpuBefore;
  console.log(
    JSON.stringify(
      {
        events: EVENTS,
        contacts: CONTACTS,
        receiver_ms: RECEIVER_MS,
        delivered: seen.size,
        duplicates,
        out_of_order_per_contact: outOfOrder,
        seconds: round(seconds, 2),
        events_per_s: round(seen.size / seconds, 0),
        first_delivery_ms: round(firstAt - started, 0),
        worker_cpu_ms_per_event: round((cpu * 1000) / Math.max(1, seen.size), 3),
        connections: clientPorts.size,
      },
      null,
      2,
    ),
  );
} finally {
  clearTimeout(watchdog);
  worker?.kill("SIGTERM");
  await worker?.exited;
  await receiver?.stop(true);
  await queues.close();
  await db.destroy();
  await dropDatabase(config.databaseUrl);
  await deleteRedisPrefix(config.redisPrefix);
}
