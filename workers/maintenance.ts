import { createWhatsAppProvider } from "../src/channel/whatsapp.ts";
import { sweep } from "../src/maintenance/sweeper.ts";
import { deleteExpiredIdempotencyKeys } from "../src/messages/idempotency.ts";
import { syncAllActiveSenders } from "../src/templates/sync.ts";
import { startWorkerRuntime } from "./runtime.ts";

/**
 * Maintenance worker: the sweeper (re-enqueues what Postgres says is unfinished) and the template
 * sync. Timer loops rather than repeatable jobs, so that they survive Redis restarting empty.
 */
const runtime = startWorkerRuntime("maintenance");
const SWEEP_INTERVAL_MS = Number(process.env.SWEEP_INTERVAL_MS ?? 5000);
// Work younger than this is probably still in flight; older than this, its nudge was lost.
const SWEEP_GRACE_SECONDS = Number(process.env.SWEEP_GRACE_SECONDS ?? 10);

runtime.every("sweep", SWEEP_INTERVAL_MS, async () => {
  const result = await sweep(runtime, SWEEP_GRACE_SECONDS);
  if (result.finalize + result.status + result.send > 0)
    runtime.logger.info(result, "sweeper re-enqueued work");
});

const TEMPLATE_SYNC_INTERVAL_MS = Number(process.env.TEMPLATE_SYNC_INTERVAL_MS ?? 600_000);
const provider = createWhatsAppProvider({ baseUrl: runtime.config.whatsappGraphUrl });

runtime.every("template-sync", TEMPLATE_SYNC_INTERVAL_MS, async () => {
  const outcome = await syncAllActiveSenders({ ...runtime, provider });
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
