import { sql } from "kysely";
import { isDependencyDown } from "../http/dependency-faults.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics/index.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import type { Db } from "./connect.ts";

/**
 * Read routing (DATABASE_READ_URL): the api's reads of contacts, history, conversations and the
 * feed go to a streaming replica, with read-your-writes per application.
 *
 * After each committed accept batch the api takes the primary's WAL insert position once (one
 * query per batch, not per send) and raises, per application in the batch, a Redis key to it
 * (`{t:<tenant>}:written-lsn:<client>`, a sorted set so ZADD GT keeps the maximum whichever api
 * process writes last; TTL READ_YOUR_WRITES_SECONDS). A read by an application with such a key
 * asks the replica, on the connection that will serve the read, how far it has replayed
 * (`pg_last_wal_replay_lsn()`); behind, the read goes to the primary at once instead of waiting.
 * Reads of an application with no recent write go to the replica with no check.
 *
 * A replica that fails (down, restarting, unreachable) answers nothing: the read runs again on the
 * primary, and for REPLICA_RETRY_MS every read goes there before the replica is tried again. A
 * query the standby cancelled for a conflict with recovery runs again on the primary too.
 */

/** Whose read it is: an application of a tenant (the API's authenticated caller). */
export interface Reader {
  tenantId: string;
  clientId: string;
}

export interface ReadDatabase {
  /** Runs `work` on the database this reader's read should use. */
  run<T>(reader: Reader, work: (db: Db) => Promise<T>): Promise<T>;
  /** After a commit by these readers: remember the primary's position for their next reads. */
  noteWrites(writers: readonly Reader[]): Promise<void>;
  /** Closes the replica's pool (the primary's is its owner's to close). */
  close(): Promise<void>;
}

export type ReadRoute = "replica" | "replica_behind" | "replica_down" | "replica_conflict" | "writes_unknown";

/** How long a replica that failed is left alone before a read tries it again. */
export const REPLICA_RETRY_MS = 2000;

// The WAL insert position, not the write position: it is past the commit record of every
// transaction committed already, even one committed with synchronous_commit off.
const PRIMARY_LSN = sql<{ lsn: string }>`SELECT pg_current_wal_insert_lsn() - '0/0' AS lsn`;
// Null on a server that is not in recovery (a promoted replica, or the primary itself).
const REPLAYED_LSN = sql<{ lsn: string | null }>`SELECT pg_last_wal_replay_lsn() - '0/0' AS lsn`;
const LSN_MEMBER = "lsn";

/** SQLSTATE 40001 on a standby: a query cancelled by a conflict with recovery; the primary has none. */
function isRecoveryConflict(error: unknown): boolean {
  return (error as { code?: unknown })?.code === "40001";
}

/** Runs a reader's read through `readDb`, or on `db` (the primary) when there is no replica. */
export function readWith<T>(
  deps: { db: Db; readDb?: ReadDatabase },
  reader: Reader,
  work: (db: Db) => Promise<T>,
): Promise<T> {
  return deps.readDb ? deps.readDb.run(reader, work) : work(deps.db);
}

export interface ReplicaReadsOptions {
  primary: Db;
  replica: Db;
  redis: RedisClient;
  keys: RedisKeys;
  logger: Logger;
  metrics: Pick<Metrics, "reads">;
  readYourWritesSeconds: number;
  now?: () => number;
}

export function replicaReads(options: ReplicaReadsOptions): ReadDatabase {
  const { primary, replica, redis, keys, logger, metrics } = options;
  const now = options.now ?? Date.now;
  const ttlMs = options.readYourWritesSeconds * 1000;
  let replicaDownUntil = 0;

  const keyOf = (reader: Reader) => keys.writtenLsn(reader.tenantId, reader.clientId);

  function replicaFailed(error: unknown): void {
    if (replicaDownUntil < now()) {
      logger.warn({ err: (error as Error).message }, "read replica failed; reading from the primary");
    }
    replicaDownUntil = now() + REPLICA_RETRY_MS;
  }

  async function onPrimary<T>(route: ReadRoute, work: (db: Db) => Promise<T>): Promise<T> {
    metrics.reads.inc({ database: "primary", route });
    return work(primary);
  }

  /** The position this reader last wrote at, if within the TTL; undefined: nothing to wait for. */
  async function writtenLsn(reader: Reader): Promise<number | undefined> {
    const score = await redis.zscore(keyOf(reader), LSN_MEMBER);
    return score === null ? undefined : Number(score);
  }

  return {
    async run(reader, work) {
      if (replicaDownUntil > now()) return onPrimary("replica_down", work);
      let written: number | undefined;
      try {
        written = await writtenLsn(reader);
      } catch {
        // Redis cannot say whether this application just wrote: only the primary is sure to have it.
        return onPrimary("writes_unknown", work);
      }
      let outcome: { served: true; value: Awaited<ReturnType<typeof work>> } | { served: false };
      try {
        if (written === undefined) {
          outcome = { served: true, value: await work(replica) };
        } else {
          const lsn = written;
          // The check and the read on one connection: the server that has replayed far enough is
          // the one that answers (replay only moves forward while it runs).
          outcome = await replica.connection().execute(async (db) => {
            const replayed = (await REPLAYED_LSN.execute(db)).rows[0]?.lsn;
            if (replayed === null || replayed === undefined || Number(replayed) < lsn) {
              return { served: false as const };
            }
            return { served: true as const, value: await work(db) };
          });
        }
      } catch (error) {
        if (isRecoveryConflict(error)) return onPrimary("replica_conflict", work);
        if (!isDependencyDown(error)) throw error;
        replicaFailed(error);
        return onPrimary("replica_down", work);
      }
      if (!outcome.served) return onPrimary("replica_behind", work);
      metrics.reads.inc({ database: "replica", route: "replica" });
      return outcome.value;
    },

    async noteWrites(writers) {
      if (writers.length === 0) return;
      const lsn = (await PRIMARY_LSN.execute(primary)).rows[0]?.lsn;
      if (lsn === undefined) return;
      const keysToRaise = new Set(writers.map(keyOf));
      // One small pipeline per key (one slot each, so a Redis Cluster takes it too).
      const replies = await Promise.all(
        [...keysToRaise].map((key) =>
          redis.pipeline().zadd(key, "GT", lsn, LSN_MEMBER).pexpire(key, ttlMs).exec(),
        ),
      );
      const failed = replies.flatMap((reply) => reply ?? []).find(([error]) => error);
      if (failed) throw failed[0];
    },

    close: () => replica.destroy(),
  };
}
