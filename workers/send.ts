import { releaseDueMessages } from "../src/outbound/scheduler.ts";
import { deliverBatch } from "../src/outbound/send.ts";
import { enqueueSendRetries } from "../src/queues/index.ts";
import { startWorkerRuntime } from "./runtime.ts";

/**
 * Send worker: batches of accepted outbound messages -> the provider, exactly once, in order per
 * (sender, contact), at each sender's pace (src/outbound/send.ts). Retries are delayed jobs.
 */
const runtime = startWorkerRuntime("send");
/** A scheduled message goes out within this of its send_at. */
const SCHEDULER_TICK_MS = 250;

runtime.consume(
  "send",
  async (job) => {
    const report = await deliverBatch(runtime, job.data.messageIds);
    const counts: Record<string, number> = {};
    for (const outcome of report.outcomes.values()) {
      runtime.metrics.deliveries.inc({ outcome });
      counts[outcome] = (counts[outcome] ?? 0) + 1;
    }
    await enqueueSendRetries(runtime.queues.send, report.later, runtime.config.workers.sendRetryBaseMs);
    return counts;
  },
  runtime.config.workers.sendConcurrency,
);

// Scheduled sends whose time has come, into delivery (src/outbound/scheduler.ts). Every send worker
// runs it; they share the due messages without doubling any.
runtime.every("scheduled-sends", SCHEDULER_TICK_MS, async () => {
  const released = await releaseDueMessages(runtime);
  if (released > 0) runtime.logger.info({ messages: released }, "scheduled messages due, into delivery");
});
