import type { MetricObjectWithValues, MetricValue } from "prom-client";
import type { Logger } from "../logger.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import { METRICS_SNAPSHOT_TTL_SECONDS, type Metrics, SCRAPE_TIME_METRICS } from "./index.ts";

/**
 * How every process reaches the scrape: every few seconds (and once more on shutdown) a process
 * writes its name and whole registry as JSON to Redis under its own key with a TTL, and records the
 * key in an index scored by the time it wrote. Any api process's /metrics reads the snapshots written
 * within the TTL and merges them (src/ops/metrics-scrape.ts), so a scrape of any one api process (several share a
 * port: API_PROCESSES) sees every process once. An api process also writes its snapshot at the start
 * of each scrape it answers and its series come from there, so a series never goes backwards between
 * two scrapes answered by different processes. A process that died simply stops being listed. Keys
 * share the `{metrics}` hash tag, so on Redis Cluster the index and the snapshots are in one slot.
 */

const METRICS_PUBLISH_INTERVAL_MS = 5000;

/** What a process publishes: its process name and `registry.getMetricsAsJSON()`. */
export interface WorkerSnapshot {
  /** The process name (api, send, finalize, ...). */
  worker: string;
  metrics: MetricObjectWithValues<MetricValue<string>>[];
}

export interface MetricsPublisher {
  /**
   * Writes a snapshot now; false when Redis is not connected. Writes of one process never overlap,
   * so a later one is never older.
   */
  publish(): Promise<boolean>;
  /** Publishes every few seconds from now on. */
  start(): void;
  /** Stops the timer and, when it ran, writes a last snapshot (its counts stay visible until the TTL lapses). */
  stop(): Promise<void>;
}

/** A worker's publisher, already started. */
export function startMetricsPublisher(deps: PublisherDeps): MetricsPublisher {
  const publisher = createMetricsPublisher(deps);
  publisher.start();
  return publisher;
}

interface PublisherDeps {
  redis: RedisClient;
  keys: RedisKeys;
  metrics: Metrics;
  logger: Logger;
}

export function createMetricsPublisher(deps: PublisherDeps): MetricsPublisher {
  const key = deps.keys.workerMetrics(deps.metrics.process, deps.metrics.processId);
  const index = deps.keys.workerMetricsIndex();
  let failing = false;
  let timer: ReturnType<typeof setInterval> | undefined;
  let last: Promise<boolean> = Promise.resolve(true);

  const write = async () => {
    // While Redis is away, skip: a queueing connection would pile up snapshots in memory.
    if (deps.redis.status !== "ready") return false;
    const snapshot: WorkerSnapshot = {
      worker: deps.metrics.process,
      // Values read at scrape time are the whole deployment's: the scraping process reads them now.
      metrics: (await deps.metrics.registry.getMetricsAsJSON()).filter(
        (family) => !SCRAPE_TIME_METRICS.has(family.name),
      ),
    };
    await deps.redis
      .multi()
      .set(key, JSON.stringify(snapshot), "EX", METRICS_SNAPSHOT_TTL_SECONDS)
      .zadd(index, Date.now(), key)
      .exec();
    return true;
  };

  const publish = () => {
    last = last.then(write, write);
    return last;
  };

  const tick = async () => {
    try {
      await publish();
      failing = false;
    } catch (error) {
      // Redis away: the next tick tries again; say so once, not every five seconds.
      if (!failing) deps.logger.warn({ err: (error as Error).message }, "metrics publish failed");
      failing = true;
    }
  };

  return {
    publish,
    start() {
      timer ??= setInterval(() => void tick(), METRICS_PUBLISH_INTERVAL_MS);
      void tick();
    },
    async stop() {
      if (timer === undefined) return;
      clearInterval(timer);
      timer = undefined;
      await tick();
    },
  };
}

/** The snapshots of every process that published within the TTL; drops index entries of dead ones. */
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
