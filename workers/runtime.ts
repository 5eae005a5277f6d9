import { DelayedError, type Processor, Queue, Worker } from "bullmq";
import { sql } from "kysely";
import type { ChannelProvider } from "../src/channel/provider.ts";
import { createWhatsAppProvider } from "../src/channel/whatsapp.ts";
import { type Clock, systemClock } from "../src/clock.ts";
import { type Config, loadConfigOrExit } from "../src/config.ts";
import { createDb, type Db } from "../src/db/connect.ts";
import { type FeedSequencerLoop, startFeedSequencer } from "../src/feed/sequencer.ts";
import { isDependencyDown } from "../src/http/dependency-faults.ts";
import { stopWithParent } from "../src/lib/stop-with-parent.ts";
import { withTimeout } from "../src/lib/with-timeout.ts";
import { createLogger, type Logger } from "../src/logger.ts";
import { createMetrics, type Metrics } from "../src/metrics/index.ts";
import { instrumentProvider } from "../src/metrics/provider.ts";
import { startMetricsPublisher } from "../src/metrics/publish.ts";
import { nudgeEndpointsOf } from "../src/push/service.ts";
import {
  createQueues,
  type JobData,
  type QueueName,
  type Queues,
  queueErrorListener,
  queuePrefix,
} from "../src/queues/index.ts";
import { createRedis, type RedisClient, redisKeys } from "../src/redis/connect.ts";
import { readyJobs, superviseConsumer } from "./consumer-supervisor.ts";

/** What every worker process has: configuration, Postgres, Redis, the queues, a clock, a logger. */
export interface WorkerContext {
  config: Config;
  db: Db;
  redis: RedisClient;
  queues: Queues;
  clock: Clock;
  logger: Logger;
  /** This process's metrics; published to Redis for the api's /metrics (src/metrics/publish.ts). */
  metrics: Metrics;
  /** The provider over HTTP, every call counted and timed in `metrics`. */
  provider: ChannelProvider;
}

export interface WorkerRuntime extends WorkerContext {
  /**
   * Runs `processor` for one queue; failures are retried with backoff by BullMQ. A worker that stops
   * taking jobs while jobs wait is replaced (workers/consumer-supervisor.ts).
   */
  consume<N extends QueueName>(name: N, processor: Processor<JobData[N]>, concurrency: number): void;
  /** A loop that survives Redis restarts (a timer, not a repeatable job); errors are logged, not fatal. */
  every(name: string, intervalMs: number, task: () => Promise<unknown>): void;
  /** The feed sequencer loop this process runs (DESIGN §6); kick it after finalizing a message. */
  feedSequencer: FeedSequencerLoop;
  /** Resolves once the process is told to stop and has drained. */
  stopped: Promise<void>;
}

export function startWorkerRuntime(processName: string): WorkerRuntime {
  const config = loadConfigOrExit();
  const logger = createLogger(config.logLevel, processName);
  // Every connection logs a dependency's outage once, to the process's logger (not once a retry).
  const db = createDb(config.databaseUrl, { applicationName: `messaging-${processName}`, max: 10, logger });
  const redis = createRedis(config, { forQueues: true, connectionName: `messaging-${processName}`, logger });
  const queues = createQueues(config, config.redisPrefix, {
    forQueues: true,
    connectionName: `messaging-${processName}-queues`,
    logger,
  });
  const metrics = createMetrics({ process: processName });
  const provider = instrumentProvider(createWhatsAppProvider({ baseUrl: config.whatsappGraphUrl }), metrics);
  const metricsPublisher = startMetricsPublisher({
    redis,
    keys: redisKeys(config.redisPrefix),
    metrics,
    logger,
  });
  // Each consumer's worker in service now (a replaced one is the supervisor's to close).
  const consumers: { current(): Worker; stop(): void }[] = [];
  const workers = () => consumers.map((consumer) => consumer.current());
  const timers: ReturnType<typeof setTimeout>[] = [];
  let stopping = false;
  const gate = createDependencyGate({ db, redis, logger, workers, stopping: () => stopping });
  guardProcess(logger);
  let resolveStopped: () => void = () => {};
  const stopped = new Promise<void>((resolve) => {
    resolveStopped = resolve;
  });

  // Every worker process runs one, so the feed advances while any worker is alive.
  const feedSequencer = startFeedSequencer(db, logger, {
    shards: config.workers.feedShards,
    heads: { redis: config, redisPrefix: config.redisPrefix },
    onTick(tick, seconds) {
      metrics.feedTickDuration.observe(seconds);
      metrics.feedBatchSize.observe(tick.taken);
      // New events: their tenants' webhook endpoints have something to deliver (the sweeper is the backstop).
      if (tick.eventTenants.length > 0) {
        nudgeEndpointsOf({ db, queues }, tick.eventTenants).catch((error) =>
          logger.warn({ err: (error as Error).message }, "webhook endpoints not nudged"),
        );
      }
    },
  });

  const runtime: WorkerRuntime = {
    config,
    db,
    redis,
    queues,
    clock: systemClock,
    logger,
    metrics,
    provider,
    feedSequencer,
    stopped,
    consume(name, processor, concurrency) {
      // Errors the processor threw, already on their attempt's "job" line.
      const logged = new WeakSet<object>();
      // One log line and one duration sample per job attempt; a failed one is a warning with its error.
      const timed: Processor<JobData[typeof name]> = async (job, token) => {
        const started = performance.now();
        let failure: { error: unknown; deferred?: boolean } | undefined;
        try {
          return await processor(job, token);
        } catch (error) {
          // Postgres or Redis away is not the job's fault: the process's consumers pause, and the
          // job goes back to the queue without spending one of its attempts (if Redis takes it).
          if (isDependencyDown(error)) {
            gate.trip(error);
            const parked =
              token !== undefined &&
              (await job.moveToDelayed(Date.now() + DEPENDENCY_RETRY_MS, token).then(
                () => true,
                () => false,
              ));
            if (parked) {
              failure = { error, deferred: true };
              throw new DelayedError();
            }
          }
          failure = { error };
          if (typeof error === "object" && error !== null) logged.add(error);
          throw error;
        } finally {
          const seconds = (performance.now() - started) / 1000;
          const outcome = failure ? "failed" : "completed";
          metrics.jobDuration.observe({ queue: name, outcome }, seconds);
          const line = {
            queue: name,
            job_name: job.name,
            job_id: job.id,
            attempt: job.attemptsMade + 1,
            duration_ms: Math.round(seconds * 100_000) / 100,
            outcome,
          };
          if (failure?.deferred)
            logger.info({ ...line, err: errorMessage(failure.error) }, "job deferred: dependency away");
          else if (failure) logger.warn({ ...line, err: errorMessage(failure.error) }, "job");
          else logger.info(line, "job");
        }
      };
      const create = (processor: Processor<JobData[typeof name]>) => {
        const connection = createRedis(config, {
          forQueues: true,
          connectionName: `messaging-${processName}-${name}`,
          logger,
        });
        const worker = new Worker(name, processor, {
          connection,
          prefix: queuePrefix(config.redisPrefix, name),
          concurrency,
          // A killed worker's job returns to the queue after the lock lapses.
          lockDuration: config.workers.lockMs,
          stalledInterval: config.workers.stalledIntervalMs,
          maxStalledCount: 5,
        });
        // Failures the processor did not throw: BullMQ failing a job before running it (a deferred
        // failure, too many starts) or after it returned (its result could not be stored).
        worker.on("failed", (job, error) => {
          if (logged.has(error)) return;
          logger.warn(
            { queue: name, job: job?.id, attempts: job?.attemptsMade, err: error.message },
            "job failed",
          );
        });
        worker.on("error", queueErrorListener(name, logger));
        return { worker, connection };
      };
      const queue = queues[name] as Queue;
      const consumer = superviseConsumer({
        queue: name,
        concurrency,
        processor: timed,
        create,
        // Over the process's producer connection; if that does not answer either, over a
        // connection of its own, so that a process whose every connection hangs still finds out.
        waiting: () =>
          withTimeout(readyJobs(queue), WAITING_COUNT_MS).catch(async () => {
            const connection = createRedis(config, {
              connectionName: `messaging-${processName}-count`,
              logger,
            });
            const own = new Queue(name, { connection, prefix: queuePrefix(config.redisPrefix, name) });
            own.on("error", queueErrorListener(name, logger));
            try {
              return await readyJobs(own);
            } finally {
              void own.close().catch(() => {});
              connection.disconnect();
            }
          }),
        heldBack: () => stopping || gate.holding(),
        logger,
      });
      consumers.push(consumer);
      logger.info({ queue: name, concurrency }, "consuming");
    },
    every(name, intervalMs, task) {
      // A tick that hangs (a dependency that neither answers nor fails) must not silence the loop:
      // past this bound it is logged and the next tick is scheduled as usual.
      const tickLimitMs = Math.max(LOOP_TICK_LIMIT_MS, 3 * intervalMs);
      const tick = async () => {
        if (stopping) return;
        const started = performance.now();
        try {
          const running = task();
          // A tick given up on may still fail later; that is not an unhandled rejection.
          running.catch(() => {});
          await withTimeout(running, tickLimitMs, `tick still running after ${tickLimitMs} ms`);
        } catch (error) {
          logger.warn({ loop: name, err: (error as Error).message }, "loop tick failed");
        }
        if (!stopping) timers.push(setTimeout(tick, Math.max(0, intervalMs - (performance.now() - started))));
      };
      timers.push(setTimeout(tick, 0));
    },
  };

  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "stopping: finishing active jobs");
    for (const timer of timers) clearTimeout(timer);
    for (const consumer of consumers) consumer.stop();
    gate.stop();
    // close() waits for active jobs, so none is left `active` for the stall checker to find.
    await Promise.race([Promise.all(workers().map((w) => w.close())), Bun.sleep(20_000)]);
    await feedSequencer.stop();
    // The last counts, after the last job: visible to scrapes until the snapshot's TTL lapses.
    await metricsPublisher.stop();
    await Promise.allSettled([queues.close(), db.destroy()]);
    redis.disconnect();
    logger.info("stopped");
    resolveStopped();
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
  stopWithParent((reason) => void shutdown(reason));
  return runtime;
}

/** How long the producer connection may take to count a queue's ready jobs. */
const WAITING_COUNT_MS = 2000;

/** The least time a loop's tick may take before the loop moves on without it. */
const LOOP_TICK_LIMIT_MS = 30_000;
/** A job that met a dependency fault runs again after this long (without spending an attempt). */
const DEPENDENCY_RETRY_MS = 1000;
/** How often a paused process asks Postgres and Redis whether they are back. */
const DEPENDENCY_PROBE_MS = 1000;

/**
 * While Postgres or Redis is away, this process's consumers take no jobs (BullMQ's local pause,
 * not waiting for the jobs in hand) rather than failing job after job; a probe every second
 * resumes them once both answer. Redis faults mostly never reach a processor: BullMQ's own
 * connections reconnect by themselves and the consumers carry on.
 */
function createDependencyGate(deps: {
  db: Db;
  redis: RedisClient;
  logger: Logger;
  /** The process's workers as they are now (a consumer's may have been replaced). */
  workers: () => readonly Worker[];
  stopping: () => boolean;
}) {
  let downSince: number | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const probe = async () => {
    timer = undefined;
    if (deps.stopping() || downSince === undefined) return;
    const back = await Promise.all([
      withTimeout(sql`SELECT 1`.execute(deps.db), 2000),
      withTimeout(deps.redis.ping(), 2000),
    ]).then(
      () => true,
      () => false,
    );
    if (deps.stopping()) return;
    if (!back) {
      timer = setTimeout(probe, DEPENDENCY_PROBE_MS);
      return;
    }
    deps.logger.warn({ down_ms: Date.now() - downSince }, "dependencies answer again: consumers resumed");
    downSince = undefined;
    for (const worker of deps.workers()) void worker.resume();
  };

  return {
    /** Whether the consumers are paused for a dependency now. */
    holding: () => downSince !== undefined,
    trip(error: unknown) {
      if (downSince !== undefined || deps.stopping()) return;
      downSince = Date.now();
      deps.logger.warn({ err: errorMessage(error) }, "dependency unavailable: consumers paused");
      for (const worker of deps.workers()) void worker.pause(true).catch(() => {});
      timer = setTimeout(probe, DEPENDENCY_PROBE_MS);
    },
    stop() {
      if (timer) clearTimeout(timer);
      timer = undefined;
    },
  };
}

/**
 * The last line: a dependency fault that escaped every handler (an unhandled rejection, an 'error'
 * event nobody listened to) is logged and the process carries on; anything else still ends it, as
 * it would have without these handlers.
 */
function guardProcess(logger: Logger): void {
  const handle = (kind: string) => (error: unknown) => {
    if (isDependencyDown(error)) {
      logger.warn({ err: errorMessage(error), kind }, "dependency fault outside a job; carrying on");
      return;
    }
    logger.fatal({ err: error, kind }, "process failed");
    process.exit(1);
  };
  process.on("unhandledRejection", handle("unhandledRejection"));
  process.on("uncaughtException", handle("uncaughtException"));
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
