import { deleteExpiredEvents } from "../src/events/repository.ts";
import { sweep } from "../src/maintenance/sweeper.ts";
import { deleteExpiredIdempotencyKeys } from "../src/messages/idempotency.ts";
import { deleteExpiredStatusEvents } from "../src/outbound/status.ts";
import { syncAllActiveSenders } from "../src/senders/template-sync.ts";
import { deleteExpiredPanelSessions } from "../src/users/repository.ts";
import { startWorkerRuntime } from "./runtime.ts";

/**
 * Maintenance worker: the sweeper (re-enqueues what Postgres says is unfinished) and the template
 * sync. Timer loops rather than repeatable jobs, so that they survive Redis restarting empty.
 */
const runtime = startWorkerRuntime("maintenance");

runtime.every("sweep", runtime.config.workers.sweepIntervalMs, async () => {
  const result = await sweep(runtime, runtime.config.workers.sweepGraceSeconds);
  if (result.finalize + result.status + result.send + result.adopted > 0)
    runtime.logger.info(result, "sweeper re-enqueued work");
});

runtime.every("template-sync", runtime.config.workers.templateSyncIntervalMs, async () => {
  const outcome = await syncAllActiveSenders(runtime);
  // Another maintenance process holds the lock and is syncing; this one waits for its next tick.
  if (!outcome.ran) return;
  if (outcome.failed > 0) runtime.logger.warn(outcome, "templates synced; some senders failed");
  else runtime.logger.info(outcome, "templates synced");
});

// Idempotency keys are honoured for 24 hours (DESIGN §3); older records only take space.
runtime.every("idempotency-expiry", 600_000, async () => {
  const deleted = await deleteExpiredIdempotencyKeys(runtime.db, runtime.clock.now());
  if (deleted > 0) runtime.logger.info({ deleted }, "expired idempotency keys dropped");
});

// Statuses of messages never known by their provider id wait 7 days, then go (src/outbound/status.ts).
runtime.every("status-event-expiry", 600_000, async () => {
  const deleted = await deleteExpiredStatusEvents(runtime.db, runtime.clock.now());
  if (deleted > 0) runtime.logger.info({ deleted }, "expired status events dropped");
});

// Events are kept 30 days (DESIGN §12; src/events/repository.ts).
runtime.every("event-expiry", 600_000, async () => {
  const deleted = await deleteExpiredEvents(runtime.db, runtime.clock.now());
  if (deleted > 0) runtime.logger.info({ deleted }, "expired events dropped");
});

// Expired panel sessions are refused on read; this only reclaims their rows.
runtime.every("panel-session-expiry", 600_000, async () => {
  const deleted = await deleteExpiredPanelSessions(runtime.db, runtime.clock.now());
  if (deleted > 0) runtime.logger.info({ deleted }, "expired panel sessions dropped");
});
