/**
 * The event log's time partitions (sql/027): the maintenance worker creates them ahead of the clock
 * and drops the ones whose every row is past retention, so that the log's expiry is a drop, not a
 * delete per row. A row no partition covers lands in `events_default` and moves into its partition
 * when that is created.
 *
 * Both DDL statements wait at most LOCK_TIMEOUT for their lock and give up otherwise (the next pass
 * tries again): attaching takes the default partition exclusively for the moment of the move, and
 * dropping takes the whole log exclusively, so a long read of the log must not queue every sequencer
 * tick and every reader behind them.
 */
import { sql } from "kysely";
import { DAY_MS } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { EVENT_RETENTION_MS } from "./repository.ts";

const LOCK_TIMEOUT = "2s";
/** Partitions created ahead of the clock: a maintenance worker down for less than this changes nothing. */
export const PARTITIONS_AHEAD = 3;

export interface EventPartition {
  name: string;
  from: Date;
  to: Date;
}

/** The log's range partitions in time order (the default partition is not among them). */
export async function listEventPartitions(db: Db): Promise<EventPartition[]> {
  const { rows } = await sql<EventPartition>`
    SELECT c.relname AS name, b.m[1]::timestamptz AS "from", b.m[2]::timestamptz AS "to"
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    CROSS JOIN LATERAL (
      SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']+)''\\) TO \\(''([^'']+)''\\)') AS m
    ) b
    WHERE i.inhparent = 'events'::regclass AND b.m IS NOT NULL
    ORDER BY 2`.execute(db);
  return rows;
}

function partitionName(from: Date): string {
  const stamp = from.toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "_");
  return `events_${stamp}`;
}

/**
 * Makes partitions cover [now, now + ahead intervals), each `intervalMs` wide and aligned to it
 * (UTC), around the ones that exist (which may have another width: the interval is a setting).
 * Returns the names created.
 */
export async function createEventPartitions(
  db: Db,
  now: Date,
  intervalMs: number,
  ahead = PARTITIONS_AHEAD,
): Promise<string[]> {
  const existing = await listEventPartitions(db);
  const end = now.getTime() + ahead * intervalMs;
  const created: string[] = [];
  let cursor = Math.floor(now.getTime() / intervalMs) * intervalMs;
  while (cursor < end) {
    const covering = existing.find((p) => p.from.getTime() <= cursor && cursor < p.to.getTime());
    if (covering) {
      cursor = covering.to.getTime();
      continue;
    }
    // Up to the next aligned boundary, or to the next existing partition if that starts first.
    const nextExisting = existing.find((p) => p.from.getTime() > cursor)?.from.getTime() ?? Infinity;
    const to = Math.min(Math.floor(cursor / intervalMs) * intervalMs + intervalMs, nextExisting);
    const partition = { name: partitionName(new Date(cursor)), from: new Date(cursor), to: new Date(to) };
    await attachPartition(db, partition);
    created.push(partition.name);
    cursor = to;
  }
  return created;
}

/**
 * A new partition, built apart and attached: attaching locks the log only against other DDL (CREATE
 * ... PARTITION OF would lock it against every read and write). The default partition's rows of the
 * range move into it in the same transaction, or the attach would refuse.
 */
async function attachPartition(db: Db, partition: EventPartition): Promise<void> {
  const name = sql.id(partition.name);
  const range = sql`created_at >= ${partition.from} AND created_at < ${partition.to}`;
  await db.transaction().execute(async (trx) => {
    await sql`SET LOCAL lock_timeout = ${sql.lit(LOCK_TIMEOUT)}`.execute(trx);
    await sql`LOCK TABLE events_default IN ACCESS EXCLUSIVE MODE`.execute(trx);
    await sql`CREATE TABLE ${name} (LIKE events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`.execute(trx);
    await sql`INSERT INTO ${name} SELECT * FROM events_default WHERE ${range}`.execute(trx);
    await sql`DELETE FROM events_default WHERE ${range}`.execute(trx);
    await sql`ALTER TABLE events ATTACH PARTITION ${name}
      FOR VALUES FROM (${sql.lit(partition.from.toISOString())}) TO (${sql.lit(partition.to.toISOString())})`.execute(
      trx,
    );
  });
}

/**
 * How old every row of a partition must be before it goes: the longest bound any tenant keeps its
 * events (its message retention, at most the log's 30 days).
 */
async function eventHorizonMs(db: Db): Promise<number> {
  const row = await db
    .selectFrom("tenants")
    .select((eb) => eb.fn.max("message_retention_days").as("days"))
    .executeTakeFirst();
  const days = row?.days ?? null;
  return days === null ? EVENT_RETENTION_MS : Math.min(EVENT_RETENTION_MS, Number(days) * DAY_MS);
}

/**
 * Drops the partitions whose end is past every tenant's bound. A partition still holding rows some
 * tenant keeps stays; the per-row deletes (src/maintenance/retention.ts, EVENT_EXPIRY) take
 * the expired rows of it meanwhile. Returns the names dropped.
 */
export async function dropExpiredEventPartitions(db: Db, now: Date): Promise<string[]> {
  const cutoff = now.getTime() - (await eventHorizonMs(db));
  const dropped: string[] = [];
  for (const partition of await listEventPartitions(db)) {
    if (partition.to.getTime() > cutoff) break;
    await db.transaction().execute(async (trx) => {
      await sql`SET LOCAL lock_timeout = ${sql.lit(LOCK_TIMEOUT)}`.execute(trx);
      await sql`DROP TABLE ${sql.id(partition.name)}`.execute(trx);
    });
    dropped.push(partition.name);
  }
  return dropped;
}
