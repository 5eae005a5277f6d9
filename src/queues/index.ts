import { type JobsOptions, Queue } from "bullmq";
import { isDependencyDown } from "../http/dependency-faults.ts";
import type { Logger } from "../logger.ts";
import {
  createRedis,
  type RedisClientOptions,
  type RedisTarget,
  reportedByConnection,
} from "../redis/connect.ts";

/**
 * BullMQ queues. Redis may restart empty, so a job is only ever a nudge: Postgres says what is
 * unfinished and the sweeper re-enqueues it. Job ids are derived from the row they nudge, so a
 * duplicate nudge while one is pending is a no-op.
 */
export const QUEUE_NAMES = ["send", "finalize", "status", "webhook"] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

export interface JobData {
  /**
   * Messages to send (src/outbound/send.ts): the api's committed batch, a sweep, or one message
   * whose retry is due. Ids no longer sendable are skipped, so a duplicate job is harmless.
   */
  send: {
    messageIds: string[];
    /**
     * A retry's reason (the error of the messages' last attempt), shown on the queue dashboard; the
     * worker reads only `messageIds` (each message's own `last_error` is in Postgres).
     */
    lastError?: { code: string; message: string };
  };
  finalize: { providerMessageId: string };
  /** A nudge: the status worker drains every applicable status event (src/outbound/status.ts). */
  status: { nudgedAt: number };
  /** A nudge: the webhook worker delivers this endpoint's events from its cursor (src/push/delivery.ts). */
  webhook: { endpointId: string };
}

export type Queues = { [N in QueueName]: Queue<JobData[N]> } & { close(): Promise<void> };

/**
 * A queue's key prefix, `{<prefix>:<queue>}`: the hash tag keeps every key of the queue in one Redis
 * Cluster slot, as BullMQ's scripts require, and a tag per queue lets the queues sit on different
 * shards.
 */
export function queuePrefix(redisPrefix: string, queue: QueueName): string {
  return `{${redisPrefix}:${queue}}`;
}

export const DEFAULT_JOB_OPTIONS: JobsOptions = {
  // The dashboard's history: the last thousand completed jobs of each queue, for an hour (a nudge that
  // reuses an id removes its kept job first, src/maintenance/sweeper.ts); failures stay a day.
  removeOnComplete: { age: 3600, count: 1000 },
  removeOnFail: { age: 24 * 3600 },
};

/**
 * The producers of a process share one Redis connection, their own, closed with them: BullMQ
 * defines its sixty-odd scripts on the connection it is given, and ioredis copies every script of a
 * connection onto each pipeline built on it (on the api's connection, which pipelines the send
 * admissions of each turn of the event loop, 3.8% of its samples in bench/send.ts --profile).
 */
export function createQueues(target: RedisTarget, redisPrefix: string, options: RedisClientOptions): Queues {
  const connection = createRedis(target, options);
  const make = <N extends QueueName>(name: N) => {
    const queue = new Queue<JobData[N]>(name, {
      connection,
      prefix: queuePrefix(redisPrefix, name),
      defaultJobOptions: DEFAULT_JOB_OPTIONS,
    });
    queue.on("error", queueErrorListener(name, options.logger));
    return queue;
  };
  const queues = {
    send: make("send"),
    finalize: make("finalize"),
    status: make("status"),
    webhook: make("webhook"),
  };
  return {
    ...queues,
    async close() {
      await Promise.all(Object.values(queues).map((q) => q.close()));
      await connection.quit().catch(() => connection.disconnect());
    },
  };
}

/**
 * A BullMQ Queue's or Worker's 'error' listener. Without one BullMQ prints each error raw on
 * stderr, outside the JSON log: a line block per reconnect attempt while Redis is away. Redis
 * going away is the connection's to log (once an outage, src/redis/connect.ts); anything else is
 * written here.
 */
export function queueErrorListener(queue: string, logger: Logger | undefined): (error: Error) => void {
  return (error) => {
    if (reportedByConnection(error) || isDependencyDown(error)) return;
    logger?.error({ queue, err: error.message }, "queue error");
  };
}

/** A send retries retryable provider failures this often, backing off exponentially. */
export const SEND_ATTEMPTS = 10;

/**
 * Options of every send job (the api's, the sweeper's and the retries). The messages' own retries
 * are the send worker's (messages.send_attempts, send_not_before); BullMQ's attempts only cover a
 * job that failed as a whole (a fault outside the provider call).
 */
export function sendJobOptions(retryBaseMs: number): JobsOptions {
  return { attempts: 3, backoff: { type: "exponential", delay: retryBaseMs } };
}

export interface SendNudge {
  /** The job's name on the dashboard ("send", or "sweep" for the sweeper's). */
  name?: string;
  /** Messages per job (default: all in one job). */
  chunk?: number;
  /** A job id per chunk: the same nudge added twice is one job (BullMQ ignores an existing id). */
  jobId?: (messageIds: string[]) => string;
  /** Or a deduplication id per chunk, in force only while its job waits or runs. */
  deduplicationId?: (messageIds: string[]) => string;
}

/**
 * Tells the send worker about messages to send now, in the given order (a job's messages to one
 * contact are claimed in that order). The one way a send job is added, whoever nudges: the accepted
 * batch, the scheduler, a cancel's successor, the sweeper.
 */
export async function nudgeSends(
  queue: Queue<JobData["send"]>,
  messageIds: readonly string[],
  retryBaseMs: number,
  nudge: SendNudge = {},
): Promise<void> {
  if (messageIds.length === 0) return;
  const size = nudge.chunk ?? messageIds.length;
  const jobs = [];
  for (let i = 0; i < messageIds.length; i += size) {
    const chunk = messageIds.slice(i, i + size);
    jobs.push({
      name: nudge.name ?? "send",
      data: { messageIds: chunk },
      opts: {
        ...sendJobOptions(retryBaseMs),
        ...(nudge.jobId && { jobId: nudge.jobId(chunk) }),
        ...(nudge.deduplicationId && { deduplication: { id: nudge.deduplicationId(chunk) } }),
      },
    });
  }
  if (jobs.length === 1) await queue.add(jobs[0]!.name, jobs[0]!.data, jobs[0]!.opts);
  else await queue.addBulk(jobs);
}

/** Retries due within this of each other share one delayed job. */
const RETRY_GROUP_MS = 50;

/**
 * Messages to try again once due: one delayed job per group due together with the same error code,
 * its data carrying that error (`lastError`, the first message's) for the queue dashboard. The job id
 * names the group's first message and due time, so the same retry enqueued twice is one job.
 */
export async function enqueueSendRetries(
  queue: Queue<JobData["send"]>,
  later: readonly { messageId: string; dueAt: number; lastError?: { code: string; message: string } }[],
  retryBaseMs: number,
): Promise<void> {
  if (later.length === 0) return;
  const groups = new Map<
    string,
    { dueAt: number; messageIds: string[]; lastError?: JobData["send"]["lastError"] }
  >();
  for (const { messageId, dueAt, lastError } of later) {
    const slot = Math.ceil(dueAt / RETRY_GROUP_MS) * RETRY_GROUP_MS;
    const key = `${slot} ${lastError?.code ?? ""}`;
    const group = groups.get(key);
    if (group) group.messageIds.push(messageId);
    else groups.set(key, { dueAt: slot, messageIds: [messageId], ...(lastError && { lastError }) });
  }
  const now = Date.now();
  await queue.addBulk(
    [...groups.values()].map(({ dueAt, messageIds, lastError }) => ({
      name: "retry",
      data: {
        messageIds,
        ...(lastError && { lastError: { code: lastError.code, message: lastError.message } }),
      },
      opts: {
        ...sendJobOptions(retryBaseMs),
        jobId: `retry-${messageIds[0]}-${dueAt}`,
        delay: Math.max(0, dueAt - now),
      },
    })),
  );
}

/** Job ids may not contain ':' in BullMQ; provider ids are made safe and stay unique. */
export function jobIdFor(kind: string, id: string): string {
  return `${kind}-${id.replaceAll(":", "_")}`;
}
