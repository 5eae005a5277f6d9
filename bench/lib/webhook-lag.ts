/**
 * `bench/send.ts --webhook`: a receiver in this process answering each post after `receiverMs`, and
 * one endpoint of the bench tenant subscribed to every event. `finish` waits (bounded) for every
 * event of the log to arrive, then reports the lag from each event happening to its arrival
 * (p50/p99/max), events received, and duplicates.
 */
import { sql } from "kysely";
import { systemClock } from "../../src/clock.ts";
import { loadConfig } from "../../src/config.ts";
import type { Db } from "../../src/db/connect.ts";
import { createEventCursorCodec } from "../../src/events/cursor.ts";
import { createWebhookEndpoint } from "../../src/push/service.ts";
import { createQueues } from "../../src/queues/index.ts";
import { quantile } from "./format.ts";

export async function startWebhookEndpoint(
  db: Db,
  tenantId: string,
  env: Record<string, string | undefined>,
  receiverMs: number,
) {
  const arrivals = new Map<string, number>();
  let duplicates = 0;
  const receiver = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const id = request.headers.get("webhook-id") ?? "";
      await request.arrayBuffer();
      await Bun.sleep(receiverMs);
      if (arrivals.has(id)) duplicates++;
      else arrivals.set(id, Date.now());
      return new Response(null, { status: 204 });
    },
  });
  const config = loadConfig(env);
  const queues = createQueues(config, config.redisPrefix, {
    forQueues: true,
    connectionName: "bench-webhook",
  });
  await createWebhookEndpoint(
    { db, clock: systemClock, queues, config, cursors: createEventCursorCodec(config) },
    tenantId,
    { url: `http://127.0.0.1:${receiver.port}/hooks` },
  );
  return {
    async finish(timeoutMs: number) {
      const deadline = performance.now() + timeoutMs;
      let total = 0;
      while (performance.now() < deadline) {
        total =
          (
            await sql<{
              n: number;
            }>`SELECT count(*)::int AS n FROM events WHERE tenant_id = ${tenantId}`.execute(db)
          ).rows[0]?.n ?? 0;
        if (arrivals.size >= total) break;
        await Bun.sleep(500);
      }
      const rows = await sql<{ id: string; at: number }>`
        SELECT id, (extract(epoch FROM created_at) * 1000)::float8 AS at FROM events
        WHERE tenant_id = ${tenantId}`.execute(db);
      const lags = rows.rows
        .flatMap((row) => {
          const arrived = arrivals.get(row.id);
          return arrived === undefined ? [] : [(arrived - row.at) / 1000];
        })
        .sort((a, b) => a - b);
      await receiver.stop(true);
      await queues.close();
      return {
        events: total,
        received: arrivals.size,
        duplicates,
        lag_seconds: {
          p50: quantile(lags, 0.5),
          p99: quantile(lags, 0.99),
          max: lags.at(-1) ?? Number.NaN,
        },
      };
    },
  };
}
