import { deliverOutboundMessage } from "../src/outbound/send.ts";
import { startWorkerRuntime } from "./runtime.ts";

/** Send worker: accepted outbound messages -> the provider, exactly once (src/outbound/send.ts). */
const runtime = startWorkerRuntime("send");

runtime.consume(
  "send",
  async (job) => {
    const finalAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    const outcome = await deliverOutboundMessage(runtime, job.data.messageId, {
      finalAttempt,
    });
    runtime.metrics.deliveries.inc({ outcome });
    return { outcome };
  },
  runtime.config.workers.sendConcurrency,
);
