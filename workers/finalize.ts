import { finalizeInbound } from "../src/inbound/finalize.ts";
import { startWorkerRuntime } from "./runtime.ts";

/** Finalize worker: stored inbound webhook messages -> contacts, messages, conversations, feed hand-off. */
const runtime = startWorkerRuntime("finalize");
runtime.consume(
  "finalize",
  async (job) => {
    const outcome = await finalizeInbound(runtime.db, runtime.clock, job.data.providerMessageId);
    // Committed: number it now rather than at the next timer tick.
    if (outcome?.feed) runtime.feedSequencer.kick();
    return outcome ? { messageId: outcome.messageId, created: outcome.created } : { missing: true };
  },
  10,
);
