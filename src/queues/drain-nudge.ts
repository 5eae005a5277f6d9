import type { JobsOptions, Queue } from "bullmq";

/**
 * A drain nudge: a job that tells a worker "there is work in Postgres", coalesced per queue. While
 * one waits, another is not added (BullMQ deduplication by a fixed id); one added while the drain
 * job is ACTIVE is kept by BullMQ and becomes the next job atomically when the active one finishes
 * (`keepLastIfActive`), so an event committed after the drain's last empty read still gets a
 * drain. At most one waiting and one active nudge per queue; the sweeper remains the backstop.
 */
export function drainNudgeOptions(queueName: string, jobId?: string, scope?: string): JobsOptions {
  return {
    ...(jobId && { jobId }),
    deduplication: {
      id: scope ? `${queueName}-drain-${scope}` : `${queueName}-drain`,
      keepLastIfActive: true,
    },
    // A failed drain (a deadlock, a bad row) is tried again; the next nudge or the sweeper follow.
    attempts: 3,
    backoff: { type: "exponential", delay: 500 },
  };
}

/**
 * `scope` coalesces per thing drained rather than per queue (a webhook endpoint): at most one waiting
 * and one active nudge of each.
 */
export async function nudgeDrain<T>(queue: Queue<T>, data: T, jobId?: string, scope?: string): Promise<void> {
  // biome-ignore lint/suspicious/noExplicitAny: BullMQ's generic name/data typing is not inferable here
  await (queue as Queue<any>).add("drain", data, drainNudgeOptions(queue.name, jobId, scope));
}
