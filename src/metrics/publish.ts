import type { MetricObjectWithValues, MetricValue } from "prom-client";
import type { Logger } from "../logger.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import type { Metrics } from "./index.ts";

/**
 * How worker processes reach the scrape: every few seconds (and once more on shutdown) a worker
 * writes its whole registry as JSON to Redis under its own key with a TTL, and records the key in an
 * index scored by the time it wrote. The api's /metrics reads the snapshots written within the TTL
 * and merges them with its own registry (scrape.ts). A worker that died simply stops being listed.
 * Keys share the `{metrics}` hash tag, so on Redis Cluster the index and the snapshots are in one slot.
 */

export const METRICS_PUBLISH_INTERVAL_MS = 5000;
export const METRICS_SNAPSHOT_TTL_SECONDS = 30;

type Snapshot = MetricObjectWithValues<MetricValue<string>>[];

export interface MetricsPublisher {
  /** Writes the current snapshot now. */
  publish(): Promise<void>;
  /** Stops the timer and writes a last snapshot (its counts stay visible until the TTL lapses). */
  stop(): Promise<void>;
}

export function startMetricsPublisher(
  deps: { redis: RedisClient; keys: RedisKeys; metrics: Metrics; logger: Logger },
  intervalMs = METRICS_PUBLISH_INTERVAL_MS,
): MetricsPublisher {
  const key = deps.keys.workerMetrics(deps.metrics.process, deps.metrics.processId);
  const index = deps.keys.workerMetricsIndex();
  let failing = false;

  const publish = async () => {
    // While Redis is away, skip: a queueing connection would pile up snapshots in memory.
    if (deps.redis.status !== "ready") return;
    try {
      const snapshot = JSON.stringify(await deps.metrics.registry.getMetricsAsJSON());
      await deps.redis
        .multi()
        .set(key, snapshot, "EX", METRICS_SNAPSHOT_TTL_SECONDS)
        .zadd(index, Date.now(), key)
        .exec();
      failing = false;
    } catch (error) {
      // Redis away: the next tick tries again; say so once, not every five seconds.
      if (!failing) deps.logger.warn({ err: (error as Error).message }, "metrics publish failed");
      failing = true;
    }
  };

  const timer = setInterval(() => void publish(), intervalMs);
  void publish();
  return {
    publish,
    async stop() {
      clearInterval(timer);
      await publish();
    },
  };
}

export interface WorkerSnapshot {
  /** The worker's process name (send, finalize, ...). */
  worker: string;
  metrics: Snapshot;
}

/** The snapshots of every worker that published within the TTL; drops index entries of dead ones. */
export async function readWorkerSnapshots(redis: RedisClient, keys: RedisKeys): Promise<WorkerSnapshot[]> {
  const index = keys.workerMetricsIndex();
  const cutoff = Date.now() - METRICS_SNAPSHOT_TTL_SECONDS * 1000;
  await redis.zremrangebyscore(index, "-inf", `(${cutoff}`);
  const live = await redis.zrangebyscore(index, cutoff, "+inf");
  if (live.length === 0) return [];
  const values = await redis.mget(...live);
  const prefix = keys.workerMetrics("", "").replace(/:$/, "");
  const snapshots: WorkerSnapshot[] = [];
  live.forEach((key, i) => {
    const value = values[i];
    if (!value) return; // expired between the two reads
    try {
      snapshots.push({ worker: key.slice(prefix.length).split(":")[0] ?? "", metrics: JSON.parse(value) });
    } catch {
      // a torn or foreign value: skip it rather than fail the scrape
    }
  });
  return snapshots;
}
