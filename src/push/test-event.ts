import { randomBytes } from "node:crypto";
import type { Static } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { epochSeconds } from "../clock.ts";
import type { EventSchema } from "../events/schemas.ts";
import { ApiError } from "../http/errors.ts";
import { type DeliveryAttempt, recordAttempts } from "./attempt-log.ts";
import { postDelivery } from "./post.ts";
import { findEndpoint } from "./repository.ts";
import { signingSecrets } from "./service.ts";
import { signDelivery } from "./signature.ts";
import { endpointAddressProblem } from "./url-safety.ts";

export type TestEventDeps = Pick<AppDeps, "db" | "redis" | "keys" | "clock" | "logger"> & {
  config: Pick<AppDeps["config"], "providerTokenKey"> & {
    webhooks: Pick<AppDeps["config"]["webhooks"], "allowPrivateUrls" | "timeoutMs">;
  };
};

export const TEST_EVENT_PREFIX = "evt_test_";
export const TEST_EVENT_TEXT = "This is a test event";

/**
 * A made-up `message.received` (DESIGN §12 Event), in the shape of a real one so a receiver's parsing
 * is tested too; its ids say `test` so that no one mistakes it for a customer's message.
 */
export function sampleEvent(now: Date): Static<typeof EventSchema> {
  const created = epochSeconds(now);
  return {
    object: "event",
    id: `${TEST_EVENT_PREFIX}${randomBytes(12).toString("hex")}`,
    type: "message.received",
    created,
    data: {
      object: "message",
      id: `msg_${"test".padEnd(22, "0")}`,
      direction: "inbound",
      type: "text",
      preview: TEST_EVENT_TEXT,
      text: TEST_EVENT_TEXT,
      media: null,
      status: null,
      failure: null,
      client_reference: null,
      created,
      // 555-0100..0199 numbers are reserved for fiction: no real customer has it.
      contact: { object: "contact", id: `ctc_${"test".padEnd(22, "0")}`, phone: "+15555550100" },
    },
  };
}

/**
 * Posts one sample event, signed like a real delivery, to an endpoint (the panel's "send a test
 * event"), whether it is enabled or not. Outside the event log: the endpoint's cursor and pending
 * events are untouched. The attempt joins the endpoint's last deliveries.
 */
export async function sendTestEvent(
  deps: TestEventDeps,
  tenantId: string,
  endpointId: string,
): Promise<DeliveryAttempt> {
  const endpoint = await findEndpoint(deps.db, tenantId, endpointId);
  if (!endpoint) {
    throw new ApiError("resource_missing", `No such webhook endpoint: ${endpointId}.`, {
      param: "endpoint_id",
    });
  }
  const now = deps.clock.now();
  const event = sampleEvent(now);
  const body = JSON.stringify(event);
  // Checked now as for a delivery: the name may have been re-pointed since the endpoint was made.
  const problem = await endpointAddressProblem(endpoint.url, deps.config.webhooks.allowPrivateUrls);
  const outcome = problem
    ? { acknowledged: false, statusCode: null, error: `not posted: url ${problem}`, latencyMs: 0 }
    : await postDelivery(
        endpoint.url,
        body,
        signDelivery(event.id, body, now, signingSecrets(deps.config.providerTokenKey, endpoint, now)),
        deps.config.webhooks.timeoutMs,
      );
  const attempt: DeliveryAttempt = {
    at: deps.clock.now().getTime(),
    event_id: event.id,
    type: event.type,
    status_code: outcome.statusCode,
    latency_ms: outcome.latencyMs,
    outcome: outcome.acknowledged ? "acknowledged" : "failed",
    error: outcome.error,
  };
  // The log is diagnostics: a Redis that is down loses the entry, not the answer.
  await recordAttempts(deps.redis, deps.keys, endpoint.id, [attempt]).catch((error) =>
    deps.logger.warn({ endpoint: endpoint.id, err: (error as Error).message }, "attempt log not written"),
  );
  return attempt;
}
