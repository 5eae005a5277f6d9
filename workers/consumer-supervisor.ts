import type { Job, Processor, Queue, Worker } from "bullmq";
import { withTimeout } from "../src/lib/with-timeout.ts";
import type { Logger } from "../src/logger.ts";
import type { RedisClient } from "../src/redis/connect.ts";

/** How often a consumer's progress is looked at. */
const CONSUMER_CHECK_MS = 10_000;
/**
 * A consumer with a free slot that started no job while jobs waited this long is stuck. Far above
 * BullMQ's own bounds: a lost wake-up costs a blocking read's timeout (10 s at most), a failover
 * a few seconds of retries.
 */
const CONSUMER_STUCK_MS = 30_000;
/** How long the count of waiting jobs may take before this check gives up for the round. */
const WAITING_TIMEOUT_MS = 8000;
/** How long a replaced worker may take to close before its connection is cut anyway. */
const CLOSE_TIMEOUT_MS = 5000;

/** Jobs a consumer could take now: waiting or prioritized. */
export async function readyJobs(queue: Queue): Promise<number> {
  const counts = await queue.getJobCounts("wait", "prioritized");
  return (counts.wait ?? 0) + (counts.prioritized ?? 0);
}

/** A BullMQ worker and the connection made for it (closed with it). */
export interface ConsumerParts<T> {
  worker: Worker<T>;
  connection: RedisClient;
}

export interface Consumer<T> {
  /** The worker in service now (a new one after a replacement). */
  current(): Worker<T>;
  /** How many times the worker was replaced. */
  replacements(): number;
  /** Stops watching (the worker itself is closed by its owner). */
  stop(): void;
}

/**
 * A queue consumer that is replaced when it stops taking jobs. BullMQ and ioredis carry a worker
 * through Redis restarts and Cluster failovers by themselves; this is the backstop for the case
 * where they do not: a worker whose connection never comes back would otherwise leave its jobs
 * waiting for as long as the process lives (a failover in CI left a webhook worker taking no job
 * for minutes while every other process went on). Stuck means: jobs waiting all through `stuckMs`
 * while the consumer was not held back, had a slot free and started none. The replacement gets
 * fresh connections; the old worker is closed without waiting for its jobs, whose locks lapse so
 * that the new worker's stalled check hands them on (every processor here is safe to run twice:
 * leases, claims, idempotent writes).
 */
export function superviseConsumer<T>(options: {
  queue: string;
  concurrency: number;
  processor: Processor<T>;
  /** A worker running `processor`, with a connection of its own. */
  create: (processor: Processor<T>) => ConsumerParts<T>;
  /** Jobs ready to be taken (waiting or prioritized), read over another connection (8 s at most). */
  waiting: () => Promise<number>;
  /** True while the process holds its consumers back on purpose (a dependency away, stopping). */
  heldBack: () => boolean;
  logger: Logger;
  checkMs?: number;
  stuckMs?: number;
}): Consumer<T> {
  const checkMs = options.checkMs ?? CONSUMER_CHECK_MS;
  const stuckMs = options.stuckMs ?? CONSUMER_STUCK_MS;
  let active = 0;
  let lastStartedAt = Date.now();
  let replaced = 0;
  const tracked: Processor<T> = async (job: Job<T>, token?: string, signal?: AbortSignal) => {
    active++;
    lastStartedAt = Date.now();
    try {
      return await options.processor(job, token, signal);
    } finally {
      active--;
    }
  };
  let parts = options.create(tracked);

  const replace = async (waitedMs: number, waiting: number) => {
    const old = parts;
    const cluster = old.connection.isCluster
      ? { nodes: (old.connection as unknown as { nodes(): unknown[] }).nodes().length }
      : {};
    options.logger.error(
      {
        queue: options.queue,
        waited_ms: waitedMs,
        idle_ms: Date.now() - lastStartedAt,
        waiting,
        active,
        connection_status: old.connection.status,
        running: old.worker.isRunning(),
        ...cluster,
      },
      "consumer took no job while jobs waited: replacing it and its connections",
    );
    parts = options.create(tracked);
    replaced++;
    lastStartedAt = Date.now();
    await withTimeout(old.worker.close(true), CLOSE_TIMEOUT_MS).catch(() => {});
    old.connection.disconnect();
  };

  // Since when jobs have been seen waiting with no job started: one sighting is not enough (a job
  // added a moment ago waits until the worker's next fetch), jobs waiting for `stuckMs` are.
  let waitingSince: number | undefined;
  let checking = false;
  const check = async () => {
    if (options.heldBack() || active >= options.concurrency || Date.now() - lastStartedAt < checkMs) {
      waitingSince = undefined;
      return;
    }
    // Unknown (the count itself did not come) is not stuck: the next round asks again.
    const waiting = await withTimeout(options.waiting(), WAITING_TIMEOUT_MS).catch(() => 0);
    if (waiting === 0 || options.heldBack() || active >= options.concurrency) {
      waitingSince = undefined;
      return;
    }
    if (waitingSince === undefined || lastStartedAt >= waitingSince) {
      waitingSince = Date.now();
      return;
    }
    const waitedMs = Date.now() - waitingSince;
    if (waitedMs < stuckMs) return;
    waitingSince = undefined;
    await replace(waitedMs, waiting);
  };
  const timer = setInterval(() => {
    if (checking) return;
    checking = true;
    void check().finally(() => {
      checking = false;
    });
  }, checkMs);

  return {
    current: () => parts.worker,
    replacements: () => replaced,
    stop: () => clearInterval(timer),
  };
}
