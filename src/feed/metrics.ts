import { sql } from "kysely";
import type { Db } from "../db/connect.ts";

/** Messages committed but not yet given a feed position (DESIGN §6 step 5). */
export async function feedPendingCount(db: Db): Promise<number> {
  const row = await db
    .selectFrom("feed_pending")
    .select((eb) => eb.fn.countAll<number>().as("pending"))
    .executeTakeFirstOrThrow();
  return Number(row.pending);
}

/** Seconds the oldest pending message has waited for a position, by the database's clock; 0 when none. */
export async function feedOldestPendingAgeSeconds(db: Db): Promise<number> {
  // The oldest row of each shard is one probe of feed_pending_shard_queued_idx; a plain min() would scan.
  const row = await sql<{ age: number | null }>`
    SELECT EXTRACT(EPOCH FROM clock_timestamp() - min(oldest.queued_at))::float8 AS age
    FROM generate_series(0, (SELECT shards FROM feed_shards) - 1) AS s(shard),
         LATERAL (SELECT queued_at FROM feed_pending p WHERE p.shard = s.shard
                  ORDER BY queued_at LIMIT 1) AS oldest`.execute(db);
  return Math.max(0, row.rows[0]?.age ?? 0);
}
