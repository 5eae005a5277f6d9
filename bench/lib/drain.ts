/**
 * Drain mode of bench/send.ts: a sampler of what was accepted (the api's /metrics), what reached
 * the provider (the simulator) and the send queue's lag, every second; after the load, the wait for
 * the backlog and the report of it. In accept mode, the wait for requests still in flight.
 */
import type { Queue } from "bullmq";
import { sql } from "kysely";
import type { Db } from "../../src/db/connect.ts";
import { unsent } from "../../src/db/unsent.ts";
import { fmt, row, say } from "./format.ts";

export interface DrainSample {
  t: number;
  accepted: number;
  handed: number;
  /** Handed to the provider, but its status webhooks not all applied yet (sent or delivered); -1: not counted. */
  unsettled: number;
  waiting: number;
  active: number;
  delayed: number;
  oldestUnsentMs: number;
}

export type DrainSampler = ReturnType<typeof startDrainSampler>;

/** The sum of a counter's series in the api's Prometheus text (`GET /metrics`). */
export async function metricTotal(apiUrl: string, name: string): Promise<number> {
  const text = await (await fetch(`${apiUrl}/metrics`)).text();
  let total = 0;
  for (const match of text.matchAll(new RegExp(`^${name}\\{[^}]*\\} (\\d+)`, "gm")))
    total += Number(match[1]);
  return total;
}

/**
 * Drain mode: every second, what was accepted, what reached the provider, and the queue's lag. The
 * counts come from the api's /metrics (messages_accepted_total) and the simulator's count of sends,
 * not from counting rows: a count over the run's messages each second would read more rows per send
 * the longer the run, and those reads would show in the per-send counters as if the service made
 * them. The oldest unsent message is read through the small unsent index; the unsettled count (a
 * scan of the run's rows) only once the measured window is over (`settling`).
 */
export function startDrainSampler(
  db: Db,
  queue: Queue,
  t0: number,
  tenantId: string,
  urls: { api: string; simulator: string },
) {
  const samples: DrainSample[] = [];
  let running = true;
  const acceptedSoFar = () => metricTotal(urls.api, "messages_accepted_total");
  const handedSoFar = async () =>
    ((await (await fetch(`${urls.simulator}/_sim/sent?from=1000000000000`)).json()) as { total: number })
      .total;
  const take = async (settling = false): Promise<DrainSample> => {
    const [accepted, handed, unsettled, row, jobs] = await Promise.all([
      acceptedSoFar(),
      handedSoFar(),
      settling
        ? sql<{ n: number }>`
            SELECT count(*)::int AS n FROM messages
            WHERE tenant_id = ${tenantId} AND direction = 'outbound' AND status IN ('sent', 'delivered')`
            .execute(db)
            .then((r) => r.rows[0]?.n ?? 0)
        : -1,
      sql<{ oldest: Date | null }>`
        SELECT min(created_at) AS oldest FROM messages
        WHERE tenant_id = ${tenantId} AND ${unsent("messages")}`.execute(db),
      queue.getJobCounts("waiting", "active", "delayed", "prioritized"),
    ]);
    const oldest = row.rows[0]?.oldest;
    const sample = {
      t: (performance.now() - t0) / 1000,
      accepted,
      handed,
      unsettled,
      waiting: (jobs.waiting ?? 0) + (jobs.prioritized ?? 0),
      active: jobs.active ?? 0,
      delayed: jobs.delayed ?? 0,
      oldestUnsentMs: oldest ? Math.max(0, Date.now() - oldest.getTime()) : 0,
    };
    samples.push(sample);
    return sample;
  };
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      await take().catch(() => {});
      await Bun.sleep(Math.max(0, 1000 - (performance.now() - started)));
    }
  })();
  return {
    samples,
    take,
    async stop() {
      running = false;
      await loop;
    },
  };
}

export interface DrainSettings {
  drainTimeout: number;
  sendWorkers: number;
  sendConcurrency: number;
  statusDelayMs: number;
}

/**
 * Waits (bounded) for the backlog after wrk stopped. Drained: nothing queued or unsent, and no
 * request still in flight at the api (the count of accepted messages stopped moving). Settled:
 * every status webhook applied too. Stops the sampler.
 */
async function awaitBacklog(drain: DrainSampler, timeoutSeconds: number) {
  say(`drain: waiting up to ${timeoutSeconds} s for the backlog`);
  let drainedAt: number | undefined;
  let settledAt: number | undefined;
  let previous: DrainSample | undefined;
  const deadline = performance.now() + timeoutSeconds * 1000;
  while (performance.now() < deadline && settledAt === undefined) {
    const s = await drain.take(true);
    const idle = s.waiting + s.active + s.delayed === 0 && s.oldestUnsentMs === 0;
    if (drainedAt === undefined && idle && s.handed >= s.accepted && previous?.accepted === s.accepted) {
      drainedAt = s.t;
    }
    if (drainedAt !== undefined && s.unsettled === 0) settledAt = s.t;
    previous = s;
    await Bun.sleep(500);
  }
  await drain.stop();
  drain.samples.sort((a, b) => a.t - b.t);
  return { drainedAt, settledAt };
}

/**
 * After the load: waits for the backlog, then checks what reached the simulator against the rows.
 * `window`: the samples at the start and end of the measured run; `t0`: the samplers' time zero.
 */
export async function finishDrain(
  drain: DrainSampler,
  db: Db,
  settings: DrainSettings,
  run: {
    t0: number;
    tenantId: string;
    simulatorUrl: string;
    window: { start?: DrainSample; end?: DrainSample };
  },
) {
  const wrkEnd = (performance.now() - run.t0) / 1000;
  const { drainedAt, settledAt } = await awaitBacklog(drain, settings.drainTimeout);
  const last = drain.samples.at(-1);
  const simSent = (await (await fetch(`${run.simulatorUrl}/_sim/sent`)).json()) as { data: unknown[] };
  const statusRows = await db
    .selectFrom("messages")
    .select(["status", sql<number>`count(*)::int`.as("n")])
    .where("tenant_id", "=", run.tenantId)
    .where("direction", "=", "outbound")
    .groupBy("status")
    .execute();
  const { start, end } = run.window;
  const window = start && end ? end.t - start.t : Number.NaN;
  const handedRate = start && end ? (end.handed - start.handed) / window : Number.NaN;
  const acceptedRate = start && end ? (end.accepted - start.accepted) / window : Number.NaN;
  const inWindow = drain.samples.filter((s) => start && end && s.t >= start.t && s.t <= end.t);
  const maxWaiting = Math.max(0, ...inWindow.map((s) => s.waiting));
  const maxAge = Math.max(0, ...inWindow.map((s) => s.oldestUnsentMs));
  const sim = simSent.data.length;
  // Rows with the provider's id, counted once at the end (the samples count the simulator's sends).
  const handedTotal =
    (
      await sql<{ n: number }>`
        SELECT count(provider_message_id)::int AS n FROM messages
        WHERE tenant_id = ${run.tenantId} AND direction = 'outbound'`.execute(db)
    ).rows[0]?.n ?? Number.NaN;
  const after = (at: number | undefined, what: string) =>
    at === undefined
      ? `NOT ${what} within ${settings.drainTimeout} s after wrk stopped`
      : `${what} ${fmt(at - wrkEnd, 1)} s after wrk stopped`;
  const mark = (t: number) => (start && end && t >= start.t && t <= end.t ? "*" : " ");
  const report = [
    `drain (${settings.sendWorkers} send worker${settings.sendWorkers === 1 ? "" : "s"} x SEND_CONCURRENCY ${settings.sendConcurrency}, 1 status worker, simulator status delay ${settings.statusDelayMs} ms):`,
    `    measured window ${fmt(window, 1)} s: accepted ${fmt(acceptedRate)}/s (the api's messages_accepted_total), delivered to the provider ${fmt(handedRate)}/s (sends the simulator received)`,
    `    send queue at the end of the window: ${fmt(end?.waiting ?? Number.NaN)} waiting, ${fmt(end?.active ?? Number.NaN)} active, ${fmt(end?.delayed ?? Number.NaN)} delayed; max waiting in the window ${fmt(maxWaiting)}`,
    `    oldest accepted-but-unsent message: ${fmt(end?.oldestUnsentMs ?? Number.NaN)} ms at the end of the window, max ${fmt(maxAge)} ms in it`,
    `    backlog ${after(drainedAt, "drained")}; status webhooks ${after(settledAt, "all applied")}`,
    `    totals: ${fmt(last?.accepted ?? Number.NaN)} accepted, ${fmt(handedTotal)} with a provider id, ${fmt(sim)} received by the simulator (GET /_sim/sent)` +
      `${sim > handedTotal ? ` -- ${fmt(sim - handedTotal)} MORE sends than messages handed over (duplicates?)` : ""}; ` +
      `statuses ${statusRows.map((r) => `${r.status} ${fmt(r.n)}`).join(", ")}`,
    "    (* = measured window)  t(s)  accepted  handed  unsettled  waiting  active  oldest-unsent(ms)",
    ...drain.samples.map(
      (x) =>
        `                        ${mark(x.t)}${row([
          [x.t.toFixed(1), 5],
          [x.accepted, 9],
          [x.handed, 7],
          [x.unsettled < 0 ? "-" : x.unsettled, 10],
          [x.waiting, 8],
          [x.active, 7],
          [x.oldestUnsentMs, 18],
        ])}`,
    ),
  ];
  return {
    /** For results.json. */
    results: {
      samples: drain.samples,
      handedPerSecond: handedRate,
      acceptedPerSecond: acceptedRate,
      drainedSecondsAfterWrk: drainedAt === undefined ? null : drainedAt - wrkEnd,
      settledSecondsAfterWrk: settledAt === undefined ? null : settledAt - wrkEnd,
      simulatorSent: sim,
      statuses: statusRows,
    },
    /** For the verdict. */
    drained: { handedPerSecond: handedRate, maxOldestUnsentMs: maxAge },
    report,
  };
}

/**
 * Accept mode, after the load: requests wrk left in flight still finish. Waits until the count of
 * the tenant's messages stops moving (also so the api is not stopped under them), then counts the
 * jobs they enqueued (no workers take them).
 */
export async function settleAccepted(db: Db, queue: Queue, tenantId: string) {
  let previous = -1;
  for (let i = 0; i < 60; i++) {
    const counted = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM messages WHERE tenant_id = ${tenantId}`.execute(db);
    const n = counted.rows[0]?.n ?? 0;
    if (n === previous) break;
    previous = n;
    await Bun.sleep(500);
  }
  const counts = await queue.getJobCounts("waiting");
  return { sendQueueWaiting: counts.waiting, messagesAccepted: previous };
}
