import { AggregatorRegistry } from "prom-client";
import type { Db } from "../db/connect.ts";
import { feedOldestPendingAgeSeconds, feedPendingCount } from "../feed/metrics.ts";
import type { Logger } from "../logger.ts";
import { type Metrics, SCRAPE_TIME_METRICS } from "../metrics/index.ts";
import { type MetricsPublisher, readWorkerSnapshots, type WorkerSnapshot } from "../metrics/publish.ts";
import { endpointHealth } from "../push/repository.ts";
import { QUEUE_NAMES, type Queues } from "../queues/index.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";

const QUEUE_STATES = ["waiting", "active", "delayed", "failed", "completed"] as const;

export interface ScrapeDeps {
  metrics: Metrics;
  metricsPublisher: MetricsPublisher;
  db: Db;
  redis: RedisClient;
  keys: RedisKeys;
  queues: Queues;
  logger: Logger;
}

/**
 * The body of GET /metrics: the snapshots every process published to Redis (publish.ts), this
 * process's written first, plus the gauges read now from BullMQ and Postgres. Every series carries
 * its process labels, so AggregatorRegistry only concatenates; it never sums two processes together.
 * Any api process answers for all of them (several may share the port). Redis away: this process's
 * own series, read live. A dependency that does not answer leaves its gauges out of this scrape
 * instead of failing it.
 */
export async function renderMetrics(deps: ScrapeDeps): Promise<{ body: string; contentType: string }> {
  const { metrics } = deps;
  const [snapshots] = await Promise.all([
    publishThenRead(deps).catch((error) => {
      deps.logger.warn({ err: (error as Error).message }, "metrics: snapshots unreadable");
      return undefined;
    }),
    refreshQueueDepths(deps),
    refreshFeedGauges(deps),
    refreshWebhookGauges(deps),
  ]);

  metrics.workerProcesses.reset();
  for (const snapshot of snapshots ?? []) {
    if (snapshot.worker !== metrics.process) metrics.workerProcesses.inc({ worker: snapshot.worker });
  }
  const own = await metrics.registry.getMetricsAsJSON();
  const families = snapshots
    ? [own.filter((family) => SCRAPE_TIME_METRICS.has(family.name)), ...snapshots.map((s) => s.metrics)]
    : [own];
  const merged = AggregatorRegistry.aggregate(
    families.map((list) =>
      // Each family's aggregator only combines series with equal labels, which never occurs here
      // (process_id differs); "sum" keeps every series, where "omit" (process_start_time_seconds)
      // would drop the whole family.
      list.map((family) => ({ ...family, aggregator: "sum" as const })),
    ),
  );
  return { body: await merged.metrics(), contentType: merged.contentType };
}

/** Every live snapshot, this process's just written among them; undefined when it could not be written. */
async function publishThenRead(deps: ScrapeDeps): Promise<WorkerSnapshot[] | undefined> {
  if (!(await deps.metricsPublisher.publish())) return undefined;
  return readWorkerSnapshots(deps.redis, deps.keys);
}

async function refreshQueueDepths(deps: ScrapeDeps): Promise<void> {
  const gauge = deps.metrics.queueJobs;
  try {
    const counts = await Promise.all(
      QUEUE_NAMES.map((name) => deps.queues[name].getJobCounts(...QUEUE_STATES)),
    );
    gauge.reset();
    QUEUE_NAMES.forEach((queue, i) => {
      for (const state of QUEUE_STATES) gauge.set({ queue, state }, counts[i]?.[state] ?? 0);
    });
  } catch (error) {
    gauge.reset();
    deps.logger.warn({ err: (error as Error).message }, "metrics: queue depths unreadable");
  }
}

async function refreshFeedGauges(deps: ScrapeDeps): Promise<void> {
  try {
    const [pending, age] = await Promise.all([
      feedPendingCount(deps.db),
      feedOldestPendingAgeSeconds(deps.db),
    ]);
    deps.metrics.feedPending.set(pending);
    deps.metrics.feedOldestPendingAge.set(age);
  } catch (error) {
    // NaN, not 0: an unknown age must not read as a healthy one.
    deps.metrics.feedPending.set(Number.NaN);
    deps.metrics.feedOldestPendingAge.set(Number.NaN);
    deps.logger.warn({ err: (error as Error).message }, "metrics: feed gauges unreadable");
  }
}

async function refreshWebhookGauges(deps: ScrapeDeps): Promise<void> {
  try {
    const health = await endpointHealth(deps.db, new Date());
    for (const [state, count] of Object.entries(health.states))
      deps.metrics.webhookEndpoints.set({ state }, count);
    deps.metrics.webhookLongestFailure.set(health.longestFailureSeconds);
  } catch (error) {
    deps.metrics.webhookEndpoints.reset();
    deps.metrics.webhookLongestFailure.set(Number.NaN);
    deps.logger.warn({ err: (error as Error).message }, "metrics: webhook gauges unreadable");
  }
}
