import { type JobsOptions, Queue } from "bullmq";
import type { RedisClient } from "../redis/connect.ts";

/**
 * BullMQ queues. Redis may restart empty, so a job is only ever a nudge: Postgres says what is
 * unfinished and the sweeper re-enqueues it. Job ids are derived from the row they nudge, so a
 * duplicate nudge while one is pending is a no-op.
 */
export const QUEUE_NAMES = ["send", "finalize", "status"] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

export interface JobData {
  send: { messageId: string };
  finalize: { providerMessageId: string };
  status: { providerMessageId: string };
}

export type Queues = { [N in QueueName]: Queue<JobData[N]> } & { close(): Promise<void> };

/** The hash tag keeps every key of every queue in one Redis Cluster slot, as BullMQ requires. */
export function queuePrefix(redisPrefix: string): string {
  return `{${redisPrefix}}`;
}

export const DEFAULT_JOB_OPTIONS: JobsOptions = {
  // Completed jobs are forgotten (their id is free for a later nudge); failures stay a day for the dashboard.
  removeOnComplete: true,
  removeOnFail: { age: 24 * 3600 },
};

/** Producers share the caller's connection (one per process, not one per queue). */
export function createQueues(connection: RedisClient, redisPrefix: string): Queues {
  const prefix = queuePrefix(redisPrefix);
  const make = <N extends QueueName>(name: N) =>
    new Queue<JobData[N]>(name, { connection, prefix, defaultJobOptions: DEFAULT_JOB_OPTIONS });
  const queues = {
    send: make("send"),
    finalize: make("finalize"),
    status: make("status"),
  };
  return {
    ...queues,
    async close() {
      await Promise.all(Object.values(queues).map((q) => q.close()));
    },
  };
}

/** A send retries retryable provider failures this often, backing off exponentially. */
export const SEND_ATTEMPTS = 10;

/** Options of every send job (the api's and the sweeper's nudges alike). */
export function sendJobOptions(retryBaseMs: number): JobsOptions {
  return { attempts: SEND_ATTEMPTS, backoff: { type: "exponential", delay: retryBaseMs } };
}

/** Job ids may not contain ':' in BullMQ; provider ids are made safe and stay unique. */
export function jobIdFor(kind: string, id: string): string {
  return `${kind}-${id.replaceAll(":", "_")}`;
}
