/**
 * What the api's Postgres pool does under load, sampled every 200 ms from pg_stat_activity, and the
 * Postgres and Redis round trips measured from outside meanwhile.
 */
import { sql } from "kysely";
import type { Db } from "../../src/db/connect.ts";
import type { RedisClient } from "../../src/redis/connect.ts";
import { fmt, quantile } from "./format.ts";

interface PoolSample {
  active: number;
  idleInTransaction: number;
  idle: number;
}

/** The api's Postgres connections by state, plus Postgres and Redis round trips from outside. */
export function startProbes(db: Db, redis: RedisClient) {
  const pool: PoolSample[] = [];
  const pgRtt: number[] = [];
  const redisRtt: number[] = [];
  const waits = new Map<string, number>();
  let running = true;
  const loop = (async () => {
    while (running) {
      const rows = await sql<{ state: string | null; wait: string | null; n: number }>`
        SELECT state, wait_event_type || ':' || wait_event AS wait, count(*)::int AS n
        FROM pg_stat_activity
        WHERE application_name = 'messaging-api' AND datname = current_database()
        GROUP BY 1, 2`
        .execute(db)
        .catch(() => ({ rows: [] }));
      const sample: PoolSample = { active: 0, idleInTransaction: 0, idle: 0 };
      for (const row of rows.rows) {
        if (row.state === "active") {
          sample.active += row.n;
          const key = row.wait ?? "cpu (no wait event)";
          waits.set(key, (waits.get(key) ?? 0) + row.n);
        } else if (row.state === "idle in transaction") sample.idleInTransaction += row.n;
        else if (row.state === "idle") sample.idle += row.n;
      }
      pool.push(sample);
      let t = performance.now();
      await sql`SELECT 1`.execute(db).catch(() => {});
      pgRtt.push(performance.now() - t);
      t = performance.now();
      await redis.ping().catch(() => {});
      redisRtt.push(performance.now() - t);
      await Bun.sleep(200);
    }
  })();
  return async () => {
    running = false;
    await loop;
    const avg = (pick: (s: PoolSample) => number) =>
      pool.reduce((a, s) => a + pick(s), 0) / (pool.length || 1);
    pgRtt.sort((a, b) => a - b);
    redisRtt.sort((a, b) => a - b);
    return {
      samples: pool.length,
      apiPool: {
        active: avg((s) => s.active),
        idleInTransaction: avg((s) => s.idleInTransaction),
        idle: avg((s) => s.idle),
        saturatedShare: pool.filter((s) => s.idle === 0).length / (pool.length || 1),
      },
      activeWaits: Object.fromEntries([...waits].sort((a, b) => b[1] - a[1]).slice(0, 6)),
      pgSelect1Ms: { p50: quantile(pgRtt, 0.5), p99: quantile(pgRtt, 0.99) },
      redisPingMs: { p50: quantile(redisRtt, 0.5), p99: quantile(redisRtt, 0.99) },
    };
  };
}

export type Probes = Awaited<ReturnType<ReturnType<typeof startProbes>>>;

export function describeProbes(p: Probes): string {
  const waits = Object.entries(p.activeWaits)
    .map(([w, n]) => `${w} ${fmt(n / p.samples, 1)}`)
    .join(", ");
  return [
    `api Postgres pool (pg_stat_activity, ${p.samples} samples): avg ${fmt(p.apiPool.active, 1)} active, ` +
      `${fmt(p.apiPool.idleInTransaction, 1)} idle in transaction, ${fmt(p.apiPool.idle, 1)} idle; ` +
      `no idle connection in ${fmt(p.apiPool.saturatedShare * 100)}% of samples`,
    `active connections by wait event (avg): ${waits || "-"}`,
    `from outside, under load: Postgres SELECT 1 p50 ${fmt(p.pgSelect1Ms.p50, 2)} ms / p99 ${fmt(p.pgSelect1Ms.p99, 2)} ms; ` +
      `Redis PING p50 ${fmt(p.redisPingMs.p50, 2)} ms / p99 ${fmt(p.redisPingMs.p99, 2)} ms`,
  ].join("\n    ");
}
