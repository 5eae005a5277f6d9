import type { MetricObjectWithValues, MetricValue } from "prom-client";
import type { Logger } from "../logger.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import type { Metrics } from "./index.ts";

/**
 * How worker processes reach the scrape: every few seconds (and once more on shutdown) a worker
 * writes its name and whole registry as JSON to Redis under its own key with a TTL, and records the
 * key in an index scored by the time it wrote. The api's /metrics reads the snapshots written within
 * the TTL and merges them with its own registry (scrape.ts). A worker that died simply stops being
 * listed. Keys share the `{metrics}` hash tag, so on Redis Cluster the index and the snapshots are in
 * one slot.
 */

const METRICS_PUBLISH_INTERVAL_MS = 5000;
export const METRICS_SNAPSHOT_TTL_SECONDS = 30;

/** What a worker publishes: its process name and `registry.getMetricsAsJSON()`. */
export interface WorkerSnapshot {
  /** The worker's process name (send, finalize, ...). */
  worker: string;
  metrics: MetricObjectWithValues<MetricValue<string>>[];
}

export interface MetricsPublisher {
  /** Stops the timer and writes a last snapshot (its counts stay visible until the TTL lapses). */
  stop(): Promise<void>;
}

export function startMetricsPublisher(deps: {
  redis: RedisClient;
  keys: RedisKeys;
  metrics: Metrics;
  logger: Logger;
}): MetricsPublisher {
  const key = deps.keys.workerMetrics(deps.metrics.process, deps.metrics.processId);
  const index = deps.keys.workerMetricsIndex();
  let failing = false;

  const publish = async () => {
    // While Redis is away, skip: a queueing connection would pile up snapshots in memory.
    if (deps.redis.status !== "ready") return;
    try {
      const snapshot: WorkerSnapshot = {
        worker: deps.metrics.process,
        metrics: await deps.metrics.registry.getMetricsAsJSON(),
      };
      await deps.redis
        .multi()
        .set(key, JSON.stringify(snapshot), "EX", METRICS_SNAPSHOT_TTL_SECONDS)
        .zadd(index, Date.now(), key)
        .exec();
      failing = false;
    } catch (error) {
      // Redis away: the next tick tries again; say so once, not every five seconds.
      if (!failing) deps.logger.warn({ err: (error as Error).message }, "metrics publish failed");
      failing = true;
    }
  };

  const timer = setInterval(() => void publish(), METRICS_PUBLISH_INTERVAL_MS);
  void publish();
  return {
    async stop() {
      clearInterval(timer);
      await publish();
    },
  };
}

/** The snapshots of every worker that published within the TTL; drops index entries of dead ones. */
export async function readWorkerSnapshots(redis: RedisClient, keys: RedisKeys): Promise<WorkerSnapshot[]> {
  const index = keys.workerMetricsIndex();
  const cutoff = Date.now() - METRICS_SNAPSHOT_TTL_SECONDS * 1000;
  const replies = await redis
    .multi()
    .zremrangebyscore(index, "-inf", `(${cutoff}`)
    .zrangebyscore(index, cutoff, "+inf")
    .exec();
  const [pruned, listed] = replies ?? [];
  const failure = pruned?.[0] ?? listed?.[0];
  if (failure) throw failure;
  const live = (listed?.[1] ?? []) as string[];
  if (live.length === 0) return [];
  const values = await redis.mget(...live);
  const snapshots: WorkerSnapshot[] = [];
  for (const value of values) {
    if (!value) continue; // expired between the two reads
    try {
      const snapshot = JSON.parse(value) as Partial<WorkerSnapshot>;
      // Skips a torn or foreign value (and a bare registry, as published before the worker's name
      // was part of it; it lapses with its TTL) rather than fail the scrape.
      if (typeof snapshot?.worker === "string" && Array.isArray(snapshot.metrics)) {
        snapshots.push({ worker: snapshot.worker, metrics: snapshot.metrics });
      }
    } catch {
      // not JSON: skipped as above
    }
  }
  return snapshots;
}
