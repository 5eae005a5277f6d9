import { FINALIZE_BATCH_SIZE, finalizeInbound, finalizePendingInbound } from "../src/inbound/finalize.ts";
import { startWorkerRuntime } from "./runtime.ts";

/**
 * Finalize worker: stored inbound webhook messages -> contacts, messages, conversations, feed hand-off.
 * A job is only a nudge: it drains the backlog in batches (shared with other workers through SKIP
 * LOCKED), and then makes sure the event it names is finalized.
 */
const runtime = startWorkerRuntime("finalize");

/** Finalizes batches until one comes back short; returns the provider ids it finalized. */
async function drainBacklog(): Promise<Set<string>> {
  const done = new Set<string>();
  let feed = false;
  for (;;) {
    const outcomes = await finalizePendingInbound(runtime.db, runtime.clock, FINALIZE_BATCH_SIZE);
    for (const outcome of outcomes) {
      done.add(outcome.providerMessageId);
      feed ||= outcome.feed;
    }
    // Committed: number them now rather than at the next timer tick.
    if (feed) runtime.feedSequencer.kick();
    feed = false;
    if (outcomes.length < FINALIZE_BATCH_SIZE) return done;
  }
}

// One drain at a time per process: jobs that arrive during a drain share the next one, which
// starts after their events were committed (a nudge is sent after the webhook's commit).
let current: Promise<Set<string>> | undefined;
let next: Promise<Set<string>> | undefined;
function requestDrain(): Promise<Set<string>> {
  if (!current) {
    current = drainBacklog().finally(() => {
      current = undefined;
    });
    return current;
  }
  next ??= current
    .catch(() => undefined)
    .then(() => {
      next = undefined;
      return requestDrain();
    });
  return next;
}

runtime.consume(
  "finalize",
  async (job) => {
    const providerMessageId = job.data.providerMessageId;
    const drained = await requestDrain();
    if (drained.has(providerMessageId)) return { drained: drained.size };
    // Finalized earlier or by another worker's batch (this waits for that batch to commit), or
    // stored after the drain looked: then this finalizes it.
    const outcome = await finalizeInbound(runtime.db, runtime.clock, providerMessageId);
    if (outcome?.created && outcome.feed) runtime.feedSequencer.kick();
    return outcome ? { messageId: outcome.messageId, created: outcome.created } : { missing: true };
  },
  10,
);
