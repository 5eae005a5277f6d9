import { applyStatusEvents } from "../src/outbound/status.ts";
import { startWorkerRuntime } from "./runtime.ts";

/** Status worker: provider status webhooks -> monotonic message status. */
const runtime = startWorkerRuntime("status");
runtime.consume(
  "status",
  async (job) => ({
    applied: await applyStatusEvents(runtime.db, runtime.clock, job.data.providerMessageId),
  }),
  10,
);
