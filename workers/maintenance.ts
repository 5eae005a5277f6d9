import { deleteExpired } from "../src/db/batched-delete.ts";
import { createEventPartitions, dropExpiredEventPartitions } from "../src/events/partitions.ts";
import { EVENT_EXPIRY } from "../src/events/repository.ts";
import { INBOUND_EVENT_EXPIRY } from "../src/inbound/expiry.ts";
import { applyMessageRetention } from "../src/maintenance/retention.ts";
import { sweep } from "../src/maintenance/sweeper.ts";
import { MEDIA_EXPIRY } from "../src/media/repository.ts";
import { IDEMPOTENCY_EXPIRY } from "../src/messages/idempotency.ts";
import { STATUS_EVENT_EXPIRY } from "../src/outbound/status.ts";
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

// Everything past its retention, in bounded batches (docs/operations.md, "Data lifecycle"): each
// tenant's messages (their feed entries, payloads, events, ended conversations), idempotency records
// after 24 h, statuses never matched after 7 days, finalized inbound payloads after 7 days, all
// events after 30 days, media rows 90 days past their expiry. A pass stops at its time budget and
// the next goes on.
runtime.every("retention", runtime.config.workers.retentionIntervalMs, async () => {
  const now = runtime.clock.now();
  const messages = await applyMessageRetention(runtime.db, now);
  const removed = {
    ...messages,
    idempotencyKeys: await deleteExpired(runtime.db, now, IDEMPOTENCY_EXPIRY),
    statusEvents: await deleteExpired(runtime.db, now, STATUS_EVENT_EXPIRY),
    inboundEvents: await deleteExpired(runtime.db, now, INBOUND_EVENT_EXPIRY),
    expiredEvents: await deleteExpired(runtime.db, now, EVENT_EXPIRY),
    media: await deleteExpired(runtime.db, now, MEDIA_EXPIRY),
  };
  const { done, ...counts } = removed;
  if (Object.values(counts).some((n) => n > 0)) runtime.logger.info(removed, "retention removed old rows");
});

// The event log's time partitions: created ahead of the clock, dropped once all they hold is past
// every tenant's bound (src/events/partitions.ts). A loop of its own: a partition whose lock is not
// had within the timeout is retried next tick without holding up the row retention above.
runtime.every("event-partitions", runtime.config.workers.retentionIntervalMs, async () => {
  const now = runtime.clock.now();
  const created = await createEventPartitions(
    runtime.db,
    now,
    runtime.config.workers.eventPartitionIntervalMs,
  );
  const dropped = await dropExpiredEventPartitions(runtime.db, now);
  if (created.length + dropped.length > 0)
    runtime.logger.info({ created, dropped }, "event partitions rolled");
});

// Expired panel sessions are refused on read; this only reclaims their rows.
runtime.every("panel-session-expiry", 600_000, async () => {
  const deleted = await deleteExpiredPanelSessions(runtime.db, runtime.clock.now());
  if (deleted > 0) runtime.logger.info({ deleted }, "expired panel sessions dropped");
});
