import { drainStatusEvents } from "../src/outbound/status.ts";
import { startWorkerRuntime } from "./runtime.ts";

/**
 * Status worker: stored provider status events -> monotonic message status. A job is a nudge
 * (coalesced per queue, src/queues/drain-nudge.ts): it drains the whole backlog in batches of
 * STATUS_BATCH_SIZE events, one transaction each, shared with other status workers (SKIP LOCKED).
 */
const runtime = startWorkerRuntime("status");
runtime.consume("status", async () => drainStatusEvents(runtime.db, runtime.clock), 2);
