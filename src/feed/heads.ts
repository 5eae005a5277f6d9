import type { ChainableCommander } from "ioredis";
import { sql } from "kysely";
import type { Db } from "../db/connect.ts";
import { pipelinePerSlot, type RedisClient, type RedisKeys } from "../redis/connect.ts";

/**
 * Each tenant's feed head in Redis (`epoch:last_seq`), so that a poll at the head is answered without
 * Postgres. Only the sequencer writes it, after its commit, through scripts/raise_feed_head.lua
 * (raise only). A head can lag Postgres, never lead it; a reader it stops only waits for the raise,
 * since a poll answered from it hands back the reader's own position.
 */

export interface FeedHead {
  /** The epoch the tenant's cursors carry. */
  epoch: number;
  /** The tenant's last feed position. */
  seq: number;
}

export interface TenantHead {
  tenantId: string;
  lastSeq: number;
}

/** Every head is synced from feed_heads again at the latest this long after the last sync. */
export const FEED_HEADS_SYNC_SECONDS = 60;
const SYNC_CHUNK = 1000;

type HeadPipeline = ChainableCommander & {
  raiseFeedHead(key: string, epoch: number, lastSeq: number): HeadPipeline;
};

export function parseFeedHead(value: string | null): FeedHead | undefined {
  const match = value === null ? null : /^(\d+):(\d+)$/.exec(value);
  return match ? { epoch: Number(match[1]), seq: Number(match[2]) } : undefined;
}

/** One GET. Undefined when Redis lost the key or cannot answer now: the caller asks Postgres. */
export async function readFeedHead(
  redis: RedisClient,
  keys: RedisKeys,
  tenantId: string,
): Promise<FeedHead | undefined> {
  try {
    return parseFeedHead(await redis.get(keys.feedHead(tenantId)));
  } catch {
    return undefined;
  }
}

/** The sequencer's side: where heads go, and whether this process still owes a full sync. */
export interface FeedHeadWriter {
  redis: RedisClient;
  keys: RedisKeys;
  /**
   * True until a full sync succeeds: at start (a process may have died between a commit and its
   * raise) and after a failed raise.
   */
  syncDue: boolean;
}

export function createFeedHeadWriter(redis: RedisClient, keys: RedisKeys): FeedHeadWriter {
  return { redis, keys, syncDue: true };
}

/**
 * After a tick's commit: raise the heads it moved, pipelined with a read of the sync marker.
 * Every head is then raised from feed_heads when this process owes a sync, or when the marker is gone
 * (Redis restarted empty, or it lapsed: a raise lost to a crash waits at most that long) or names
 * another epoch (an operator bumped it: older cursors must reach Postgres, which restarts them at 0).
 * Redis away: nothing is raised now and a sync is owed; readers meanwhile wait or fall back to Postgres.
 */
export async function publishFeedHeads(
  db: Db,
  writer: FeedHeadWriter,
  epoch: number,
  heads: TenantHead[],
): Promise<void> {
  const { redis, keys } = writer;
  if (redis.status !== "ready") {
    writer.syncDue = true;
    return;
  }
  try {
    // Sent together: one round trip on a single node.
    const [, synced] = await Promise.all([
      raiseHeads(redis, keys, epoch, heads),
      redis.get(keys.feedHeadsSynced()),
    ]);
    if (writer.syncDue || synced !== String(epoch)) await syncFeedHeads(db, writer);
  } catch (error) {
    writer.syncDue = true;
    throw error;
  }
}

/** Raises every tenant's head from feed_heads (with the epoch read alongside), then sets the marker. */
export async function syncFeedHeads(db: Db, writer: FeedHeadWriter): Promise<void> {
  const { redis, keys } = writer;
  // One row even without heads (tenant_id null), so the epoch is always read with them.
  const { rows } = await sql<{ epoch: number; tenant_id: string | null; last_seq: number | null }>`
    SELECT e.epoch, h.tenant_id, h.last_seq FROM feed_epoch e LEFT JOIN feed_heads h ON true`.execute(db);
  const epoch = rows[0]?.epoch ?? 0;
  const heads = rows.flatMap((row) =>
    row.tenant_id !== null && row.last_seq !== null
      ? [{ tenantId: row.tenant_id, lastSeq: row.last_seq }]
      : [],
  );
  for (let at = 0; at < heads.length; at += SYNC_CHUNK)
    await raiseHeads(redis, keys, epoch, heads.slice(at, at + SYNC_CHUNK));
  await redis.set(keys.feedHeadsSynced(), String(epoch), "EX", FEED_HEADS_SYNC_SECONDS);
  writer.syncDue = false;
}

/** Raises heads, pipelined (per slot on a Cluster); the first command error is thrown. */
async function raiseHeads(redis: RedisClient, keys: RedisKeys, epoch: number, heads: TenantHead[]) {
  const results = await pipelinePerSlot(
    redis,
    heads,
    (head) => keys.feedHead(head.tenantId),
    (pipeline, head) =>
      (pipeline as HeadPipeline).raiseFeedHead(keys.feedHead(head.tenantId), epoch, head.lastSeq),
  );
  const failed = results.find(([error]) => error);
  if (failed?.[0]) throw failed[0];
}
