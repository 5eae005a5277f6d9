import { deliverEndpoint } from "../src/push/delivery.ts";
import { nudgeEndpoint, scheduleEndpointRetry } from "../src/push/service.ts";
import { redisKeys } from "../src/redis/connect.ts";
import { startWorkerRuntime } from "./runtime.ts";

/**
 * Webhook worker: pushes the event log to the integrators' endpoints (DESIGN §12). A job is a nudge
 * for one endpoint (at most one waiting and one running per endpoint): a delivery run posts its
 * events from its cursor, in order per contact and many contacts at once, for up to RUN_LIMIT_MS,
 * then hands its slot to another endpoint and nudges its own again if more is ready. A slow or dead
 * receiver holds only its own endpoint's slot.
 */
const runtime = startWorkerRuntime("webhook");
const keys = redisKeys(runtime.config.redisPrefix);

runtime.consume(
  "webhook",
  async (job) => {
    // A retry's timer: the endpoint's own nudge runs it (never beside a run of the same endpoint).
    if (job.name === "retry") return nudgeEndpoint(runtime.queues, job.data.endpointId);
    const run = await deliverEndpoint(
      {
        ...runtime,
        keys,
        observe(outcome, latencySeconds, lagSeconds) {
          runtime.metrics.webhookDeliveries.inc({ outcome });
          runtime.metrics.webhookDeliveryLatency.observe(latencySeconds);
          if (lagSeconds !== undefined) runtime.metrics.webhookDeliveryLag.observe(lagSeconds);
        },
      },
      job.data.endpointId,
    );
    if (run.more) await nudgeEndpoint(runtime.queues, job.data.endpointId);
    else if (run.retryAt) await scheduleEndpointRetry(runtime.queues, job.data.endpointId, run.retryAt);
    return run;
  },
  runtime.config.webhooks.endpointsPerWorker,
);
