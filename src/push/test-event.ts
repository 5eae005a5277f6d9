import { randomBytes } from "node:crypto";
import type { Static } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { epochSeconds } from "../clock.ts";
import type { EventSchema } from "../events/schemas.ts";
import { attemptOf, type DeliveryAttempt, recordAttempts } from "./attempt-log.ts";
import { deliverEvent } from "./post.ts";
import { findEndpoint } from "./repository.ts";
import { endpointMissing, signingSecrets } from "./service.ts";
import { checkEndpointUrl } from "./url-safety.ts";

export type TestEventDeps = Pick<AppDeps, "db" | "redis" | "keys" | "clock" | "logger" | "lookup"> & {
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
      contact: {
        object: "contact",
        id: `ctc_${"test".padEnd(22, "0")}`,
        phone: "+15555550100",
        user_id: null,
        parent_user_id: null,
        username: null,
      },
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
  if (!endpoint) throw endpointMissing(endpointId);
  const now = deps.clock.now();
  const event = sampleEvent(now);
  const outcome = await deliverEvent(
    {
      // Checked and pinned now as for a delivery: the name may have been re-pointed since it was taken.
      destination: await checkEndpointUrl(endpoint.url, deps.config.webhooks.allowPrivateUrls, deps.lookup),
      secrets: signingSecrets(deps.config.providerTokenKey, endpoint, now),
      timeoutMs: deps.config.webhooks.timeoutMs,
    },
    event.id,
    JSON.stringify(event),
    now,
  );
  const attempt = attemptOf(event.id, event.type, outcome, deps.clock.now());
  // The log is diagnostics: a Redis that is down loses the entry, not the answer.
  await recordAttempts(deps.redis, deps.keys, endpoint.id, [attempt]).catch((error) =>
    deps.logger.warn({ endpoint: endpoint.id, err: (error as Error).message }, "attempt log not written"),
  );
  return attempt;
}
