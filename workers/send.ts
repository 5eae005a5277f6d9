import { deliverBatch } from "../src/outbound/send.ts";
import { enqueueSendRetries } from "../src/queues/index.ts";
import { startWorkerRuntime } from "./runtime.ts";

/**
 * Send worker: batches of accepted outbound messages -> the provider, exactly once, in order per
 * (sender, contact), at each sender's pace (src/outbound/send.ts). Retries are delayed jobs.
 */
const runtime = startWorkerRuntime("send");

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
