import { sql, type Transaction } from "kysely";
import { FEED_SHARDS_MAX } from "../config.ts";
import type { Db } from "../db/connect.ts";
import { ADVISORY_LOCKS } from "../db/locks.ts";
import type { Database } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import { createRedis, type RedisTarget, redisKeys } from "../redis/connect.ts";
import { createFeedHeadWriter, type FeedHeadWriter, publishFeedHeads, type TenantHead } from "./heads.ts";

/**
 * The feed sequencer (DESIGN §6 step 2): positions are given only to committed messages, by one
 * sequencer at a time per tenant, so a reader's `seq > cursor` never passes over a message that
 * commits later. Tenants are spread over the shards of feed_shards (sql/010_feed_shards.sql): each
 * feed_pending row carries its tenant's shard, and each shard is numbered under its own advisory
 * lock, so sequencers of different shards run in parallel while one tenant's are serialized.
 */

/** The advisory lock of shard n is (this, n): the two-key form, apart from every one-key lock. */
const FEED_LOCK_CLASS = ADVISORY_LOCKS.feedSequencer;
export const FEED_BATCH_SIZE = 5000;
export const FEED_TICK_INTERVAL_MS = 100;
/** Kicks closer together than this share one tick: a busy finalize worker kicks hundreds of times a second. */
export const FEED_KICK_GAP_MS = 20;

export interface FeedTick {
  /** False when another process holds the shard's lock (every shard's, for all shards); it does the work instead. */
  ran: boolean;
  /** feed_pending rows consumed (numbered, or dropped as already numbered or system messages). */
  taken: number;
  /** New feed positions. */
  numbered: number;
  /** Events numbered into the event log (DESIGN §12), in the same tick. */
  events: number;
  /** The tenants whose event log grew in this tick (their webhook endpoints are nudged). */
  eventTenants: string[];
}

interface ShardTick {
  tick: FeedTick;
  /** The shard count in Postgres when the tick ran. */
  shards: number;
}

/**
 * Raises the shard count in Postgres to `wanted` (it never lowers: rows queued in a shard must keep
 * their sequencer) and returns the count in force, which may be higher than `wanted`.
 */
export async function ensureFeedShards(db: Db, wanted: number): Promise<number> {
  await sql`UPDATE feed_shards SET shards = ${wanted}::int WHERE shards < ${wanted}::int`.execute(db);
  const row = await db.selectFrom("feed_shards").select("shards").executeTakeFirstOrThrow();
  return row.shards;
}

/**
 * One tick of every shard in turn, summed (tests, benchmarks, the end of a drain): `ran` when any
 * shard's lock was won.
 */
export async function sequenceFeed(
  db: Db,
  batchSize = FEED_BATCH_SIZE,
  heads?: FeedHeadWriter,
): Promise<FeedTick> {
  const total: FeedTick = { ran: false, taken: 0, numbered: 0, events: 0, eventTenants: [] };
  let shards = 1;
  for (let shard = 0; shard < shards; shard++) {
    const result = await sequenceFeedShard(db, shard, batchSize, heads);
    shards = result.shards;
    total.ran ||= result.tick.ran;
    total.taken += result.tick.taken;
    total.numbered += result.tick.numbered;
    total.events += result.tick.events;
    total.eventTenants.push(...result.tick.eventTenants);
  }
  return total;
}

/**
 * One tick of one shard, one transaction: win the shard's lock or leave at once, then ONE statement
 * takes the shard's oldest pending rows, drops those already numbered (and any system message),
 * numbers the rest per tenant contiguously after feed_heads.last_seq in creation order, and inserts
 * them into feed_entries. A crash anywhere rolls all of it back; the lock makes two sequencers of a
 * shard take turns. With `heads`, the tenants' heads in Redis are raised after the commit
 * (src/feed/heads.ts).
 */
async function sequenceFeedShard(
  db: Db,
  shard: number,
  batchSize: number,
  heads?: FeedHeadWriter,
): Promise<ShardTick> {
  const { tick, shards, epoch, moved } = await numberFeed(db, shard, batchSize);
  // After the commit, never before: a head must not name a position a rollback could undo.
  if (heads && tick.ran) await publishFeedHeads(db, heads, epoch, moved);
  return { tick, shards };
}

/**
 * The `heads` step of both numbering statements (the feed's, the event log's): each tenant's head
 * moved past its rows of `fresh` (`tenant_count` each), upserted in tenant order (see numberFeed),
 * the new heads returned. Positions are then `last_seq - tenant_count + n`.
 */
function raiseHeads(table: "feed_heads" | "event_heads") {
  return sql.raw(`
        INSERT INTO ${table} AS h (tenant_id, last_seq)
        SELECT tenant_id, max(tenant_count) FROM fresh GROUP BY tenant_id ORDER BY tenant_id
        ON CONFLICT (tenant_id) DO UPDATE SET last_seq = h.last_seq + excluded.last_seq
        RETURNING tenant_id, last_seq
      `);
}

async function numberFeed(
  db: Db,
  shard: number,
  batchSize: number,
): Promise<ShardTick & { epoch: number; moved: TenantHead[] }> {
  return db.transaction().execute(async (trx) => {
    // Durable before visible: a reader must never hold a cursor past a position a crash could undo.
    const lock = await sql<{ won: boolean; shards: number }>`
      SELECT set_config('synchronous_commit', 'on', true),
             -- The batch is small next to messages and feed_entries: index lookups, never a scan
             -- of either table (the planner, sizing the batch by its LIMIT, may pick hash joins).
             set_config('enable_hashjoin', 'off', true),
             set_config('enable_mergejoin', 'off', true),
             (SELECT shards FROM feed_shards) AS shards,
             pg_try_advisory_xact_lock(${FEED_LOCK_CLASS}::int, ${shard}::int) AS won`.execute(trx);
    const shards = lock.rows[0]?.shards ?? 1;
    if (!lock.rows[0]?.won || shard >= shards)
      return {
        tick: { ran: false, taken: 0, numbered: 0, events: 0, eventTenants: [] },
        shards,
        epoch: 0,
        moved: [],
      };

    // A fresh snapshot after the lock: it sees every entry the previous holder committed. Heads are
    // upserted in tenant order: while a growth of the shard count is being drained, a tenant can
    // have rows in its old shard and its new one, and two ticks then wait on its feed_heads row
    // (which keeps its positions in order) instead of deadlocking.
    const result = await sql<{ taken: number; numbered: number; epoch: number; heads: [string, number][] }>`
      WITH taken AS (
        -- The batch's rows as one array of tuple ids (read once), deleted by a TID scan. As an
        -- IN (subquery) the planner may make it a semi-join that walks every pending row; by
        -- message_id = ANY it walked the whole (shard, queued_at, message_id) index, dead entries
        -- included, for every batch. Pending rows are never updated, so their tuple ids hold.
        DELETE FROM feed_pending
        WHERE ctid = ANY(ARRAY(
          SELECT ctid FROM feed_pending WHERE shard = ${shard}::int
          ORDER BY queued_at, message_id LIMIT ${batchSize}
        ))
        RETURNING message_id
      ),
      fresh AS (
        SELECT m.id AS message_id, m.tenant_id,
               row_number() OVER (PARTITION BY m.tenant_id ORDER BY m.seq) AS n,
               count(*) OVER (PARTITION BY m.tenant_id) AS tenant_count
        FROM taken
        JOIN messages m ON m.id = taken.message_id
        WHERE NOT is_system_message(m.type)
          AND NOT EXISTS (SELECT 1 FROM feed_entries e WHERE e.message_id = taken.message_id)
      ),
      heads AS (${raiseHeads("feed_heads")}),
      numbered AS (
        INSERT INTO feed_entries (tenant_id, seq, message_id)
        SELECT fresh.tenant_id, heads.last_seq - fresh.tenant_count + fresh.n, fresh.message_id
        FROM fresh JOIN heads ON heads.tenant_id = fresh.tenant_id
        RETURNING 1
      )
      SELECT (SELECT count(*) FROM taken)::int AS taken, (SELECT count(*) FROM numbered)::int AS numbered,
             (SELECT epoch FROM feed_epoch) AS epoch,
             (SELECT coalesce(json_agg(json_build_array(tenant_id, last_seq)), '[]') FROM heads) AS heads,
             -- For the event statement that follows (planned after this one ran): until a vacuum,
             -- a minute at most, event_pending holds every row taken since, dead, and the planner
             -- chose to sort a scan of all of them for each batch over walking (shard, id).
             set_config('enable_seqscan', 'off', true) AS for_events`.execute(trx);
    const row = result.rows[0];
    const events = await numberEvents(trx, shard, batchSize);
    return {
      tick: {
        ran: true,
        taken: row?.taken ?? 0,
        numbered: row?.numbered ?? 0,
        events: events.numbered,
        eventTenants: events.tenants,
      },
      shards,
      epoch: row?.epoch ?? 0,
      moved: (row?.heads ?? []).map(([tenantId, lastSeq]) => ({ tenantId, lastSeq })),
    };
  });
}

/**
 * The event log's positions (DESIGN §12, sql/016), under the same shard lock and in the same
 * transaction as the feed's: the shard's oldest pending events, in the order they were written,
 * numbered per tenant contiguously after event_heads.last_seq, each given its `evt_` id.
 */
async function numberEvents(
  trx: Transaction<Database>,
  shard: number,
  batchSize: number,
): Promise<{ numbered: number; tenants: string[] }> {
  const result = await sql<{ taken: number; tenants: string[] }>`
    WITH taken AS (
      -- As the feed's: tuple ids, a TID scan. Planned with enable_seqscan off, which the feed
      -- statement (always just before, in this transaction) sets: off for the whole tick, the
      -- feed's own selection became a bitmap scan and a sort of every pending row.
      DELETE FROM event_pending
      WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM event_pending WHERE shard = ${shard}::int ORDER BY id LIMIT ${batchSize}
      ))
      RETURNING *
    ),
    fresh AS (
      SELECT t.*, row_number() OVER (PARTITION BY t.tenant_id ORDER BY t.id) AS n,
             count(*) OVER (PARTITION BY t.tenant_id) AS tenant_count
      FROM taken t
    ),
    heads AS (${raiseHeads("event_heads")}),
    numbered AS (
      INSERT INTO events (tenant_id, seq, id, type, message_id, status, failure, created_at, contact_id, data)
      SELECT f.tenant_id, h.last_seq - f.tenant_count + f.n, 'evt_' || translate(gen_random_uuid()::text, '-', ''),
             f.type, f.message_id, f.status, f.failure, f.created_at, f.contact_id, f.data
      FROM fresh f JOIN heads h ON h.tenant_id = f.tenant_id
      RETURNING 1
    )
    SELECT (SELECT count(*) FROM numbered)::int AS taken,
           (SELECT coalesce(array_agg(tenant_id), '{}') FROM heads) AS tenants`.execute(trx);
  return { numbered: result.rows[0]?.taken ?? 0, tenants: result.rows[0]?.tenants ?? [] };
}

export interface FeedSequencerLoop {
  /** Run a tick soon (after a finalize); kicks while a tick runs fold into one more tick. */
  kick(): void;
  /** Stops the timer and waits for a running tick. */
  stop(): Promise<void>;
}

/**
 * The sequencer as a timer loop in every worker process (not a queue job: Redis may restart empty).
 * Each round ticks every shard once, one after another (one connection at a time); a shard whose
 * lock another process holds is skipped at once, so with several processes the shards are numbered
 * in parallel. A full batch means a backlog, so the next round follows after the kick gap.
 */
export function startFeedSequencer(
  db: Db,
  logger: Logger,
  options: {
    intervalMs?: number;
    batchSize?: number;
    kickGapMs?: number;
    /** Called after each tick that held the lock, with its duration (metrics). */
    onTick?: (tick: FeedTick, seconds: number) => void;
    /**
     * Raise the tenants' feed heads in this Redis after each tick. The loop opens a connection of its
     * own: a queue connection's commands wait forever while Redis is away, and numbering must not.
     */
    heads?: { redis: RedisTarget; redisPrefix: string };
    /**
     * FEED_SHARDS: the shard count to raise Postgres' to before the first tick (never lowered). The
     * loop numbers every shard in force either way.
     */
    shards?: number;
  } = {},
): FeedSequencerLoop {
  const intervalMs = options.intervalMs ?? FEED_TICK_INTERVAL_MS;
  const batchSize = options.batchSize ?? FEED_BATCH_SIZE;
  const headsRedis =
    options.heads && createRedis(options.heads.redis, { connectionName: "messaging-feed-heads" });
  const heads =
    options.heads && headsRedis && createFeedHeadWriter(headsRedis, redisKeys(options.heads.redisPrefix));
  const kickGapMs = options.kickGapMs ?? FEED_KICK_GAP_MS;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = false;
  let lastTickAt = Number.NEGATIVE_INFINITY;
  /** Since when ticks fail (Postgres away): logged once, and once more when it answers again. */
  let failingSince: number | undefined;

  /** The shard count in force, as the last tick read it; each round ticks every shard once. */
  let shards = 1;
  /** Where the next round starts: rounds rotate, and loops start apart, so processes spread over the shards. */
  let first = Math.floor(Math.random() * FEED_SHARDS_MAX);
  let ensured = options.shards === undefined;

  // One tick of one shard: metrics, a debug line, and whether a full batch says there is more.
  const tickShard = async (shard: number) => {
    const started = performance.now();
    const result = await sequenceFeedShard(db, shard, batchSize, heads);
    shards = result.shards;
    const { tick } = result;
    const seconds = (performance.now() - started) / 1000;
    if (tick.ran) options.onTick?.(tick, seconds);
    if (tick.taken > 0) {
      logger.debug(
        { shard, tick_ms: Math.round(seconds * 100_000) / 100, batch: tick.numbered, taken: tick.taken },
        "feed sequenced",
      );
    }
    if (tick.taken === batchSize || tick.events === batchSize) again = true;
  };

  const drain = async () => {
    do {
      // Kicks arriving during this pause fold into the tick that follows it.
      const pause = lastTickAt + kickGapMs - performance.now();
      if (pause > 0) await Bun.sleep(pause);
      if (stopped) return;
      again = false;
      lastTickAt = performance.now();
      try {
        if (!ensured && options.shards !== undefined) {
          shards = await ensureFeedShards(db, options.shards);
          ensured = true;
          if (shards > options.shards) {
            logger.warn(
              { feed_shards: options.shards, in_force: shards },
              "FEED_SHARDS is below the shard count in Postgres, which never shrinks; numbering every shard",
            );
          }
        }
        const count = shards;
        for (let i = 0; i < count && !stopped; i++) await tickShard((first + i) % count);
        first = (first + 1) % shards;
        if (failingSince !== undefined) {
          logger.info({ failed_ms: Date.now() - failingSince }, "feed sequencer ticks again");
          failingSince = undefined;
        }
      } catch (error) {
        // The next timer tick retries; looping here would spin while Postgres is away.
        again = false;
        // Ten ticks a second would log ten lines a second through an outage: the first says it.
        if (failingSince === undefined) {
          failingSince = Date.now();
          logger.warn({ err: (error as Error).message }, "feed sequencer tick failed; retrying every tick");
        }
      }
    } while (again && !stopped);
  };

  const kick = () => {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = drain().finally(() => {
      running = undefined;
      // A kick that came as the last tick was finishing.
      if (again) kick();
    });
  };

  const timer = setInterval(kick, intervalMs);
  kick();
  return {
    kick,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
      headsRedis?.disconnect();
    },
  };
}
