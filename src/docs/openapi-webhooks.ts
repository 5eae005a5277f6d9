import { EVENT_TYPES, EventSchema } from "../events/schemas.ts";
import type { Components, Json } from "./openapi-schema.ts";

/**
 * The document's `webhooks` (OpenAPI 3.1): one entry per event type of the log, what an integrator's
 * receiver is posted (src/push/), with the Standard Webhooks headers as `#/components/parameters`.
 */

/** When each event is posted (the `webhooks` entries), and what its `data` then shows. */
const EVENT_MOMENTS: Record<(typeof EVENT_TYPES)[number], string> = {
  "message.received":
    "A customer's message arrived and was stored; `data` is the inbound message (`status` null). Not sent for system notices.",
  "message.sent": "The provider accepted an outbound message for delivery; `data.status` is `sent`.",
  "message.delivered": "An outbound message reached the customer's phone; `data.status` is `delivered`.",
  "message.read": "The customer read an outbound message; `data.status` is `read`.",
  "message.failed": "An outbound message failed; `data.failure` says why and whether sending again may help.",
  "message.canceled":
    "A scheduled or accepted message was canceled (POST /messages/{id}/cancel) before it was handed to the provider; `data.status` is `canceled`, and it is never sent.",
  "contact.merged":
    "Two contacts proved to be one person (one known by phone, one by business-scoped user id): the younger was merged into the older. `data` is `{survivor, merged}`: the surviving contact and the merged ids, which keep resolving to it. Its messages, conversation and opt-out moved to the survivor.",
};

const EXAMPLE_EVENT_IDS = [
  "evt_4Gh6Jk8Lm0Np2Qr4St6Uv8",
  "evt_5Hj7Kl9Mn1Pq3Rs5Tu7Vw9",
  "evt_6Jk8Lm0Np2Qr4St6Uv8Wx0",
  "evt_7Kl9Mn1Pq3Rs5Tu7Vw9Xy1",
  "evt_8Lm0Np2Qr4St6Uv8Wx0Yz2",
  "evt_9Mn1Pq3Rs5Tu7Vw9Xy1Za3",
];

/** An example delivery of each event type (valid against the Event schema; the test checks it). */
function exampleEvent(type: (typeof EVENT_TYPES)[number], index: number): Json {
  const contact = {
    object: "contact",
    id: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY",
    phone: "+4915123456789",
    user_id: "DE.1502576394655843",
    parent_user_id: null,
    username: null,
  };
  const created = 1767259800 + index * 60;
  if (type === "contact.merged") {
    const survivor = {
      ...contact,
      name: "Ana",
      user_id: "DE.1502576394655843",
      parent_user_id: null,
      username: "ana.s",
      channel: "whatsapp",
    };
    return {
      object: "event",
      id: EXAMPLE_EVENT_IDS[index % EXAMPLE_EVENT_IDS.length],
      type,
      created,
      data: { survivor, merged: ["ctc_7Pq2Rs4Tu6Vw8Xy0Za2Bc4"] },
    };
  }
  const data =
    type === "message.received"
      ? {
          object: "message",
          id: "msg_8Tb4Vc6Xd8Zf0Hg2Jk4Lm6",
          direction: "inbound",
          type: "text",
          preview: "Hi, when does my parcel arrive?",
          text: "Hi, when does my parcel arrive?",
          media: null,
          status: null,
          failure: null,
          client_reference: null,
          created,
          contact,
        }
      : {
          object: "message",
          id: "msg_3Rt5Yu7Io9Pa1Sd3Fg5Hj7",
          direction: "outbound",
          type: "template",
          preview: "Hi Ana, your order A-1 has shipped.",
          text: "Hi Ana, your order A-1 has shipped.",
          media: null,
          status: type.slice("message.".length),
          failure:
            type === "message.failed"
              ? {
                  code: "recipient_invalid",
                  message: "The number is not on WhatsApp.",
                  retryable: false,
                }
              : null,
          client_reference: "order-A-1",
          created: 1767259800,
          contact,
        };
  return { object: "event", id: EXAMPLE_EVENT_IDS[index], type, created, data };
}

/** The Standard Webhooks headers of every delivery, as `#/components/parameters`. */
export const WEBHOOK_PARAMETERS: Record<string, Json> = {
  WebhookId: {
    name: "webhook-id",
    in: "header",
    required: true,
    description:
      "The event's `evt_` id, the same on every attempt and replay of it: de-duplicate by it (keep the ids you handled for at least 3 days). A test event sent from the panel has an `evt_test_` id and made-up data.",
    schema: { type: "string", pattern: "^evt_[0-9A-Za-z_]+$" },
  },
  WebhookTimestamp: {
    name: "webhook-timestamp",
    in: "header",
    required: true,
    description:
      "When this attempt was signed, in Unix seconds. Refuse a delivery whose timestamp is more than 5 minutes from your clock (a replayed request).",
    schema: { type: "string", pattern: "^[0-9]+$" },
  },
  WebhookSignature: {
    name: "webhook-signature",
    in: "header",
    required: true,
    description:
      "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the base64-decoded part of the endpoint's `secret` after `whsec_`. While a secret is being rotated (24 hours) two signatures come, separated by a space: accept the delivery when either matches.",
    schema: { type: "string", pattern: "^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)*$" },
  },
};

const WEBHOOK_DELIVERY = `Posted to each enabled webhook endpoint subscribed to this type, signed per Standard Webhooks
(standardwebhooks.com) with the endpoint's \`secret\`. Verify the signature over the raw body before you parse it (the
SDK's \`client.webhooks.verify\`, or any Standard Webhooks library); see docs/webhooks.md for a receiver step by step.

- **Acknowledge** with any 2xx within 10 seconds; do the work afterwards. The answer's body is ignored.
- **Retries.** Anything else (another status, a timeout, a refused connection) is retried with exponential backoff and
  jitter: 5 seconds, doubling up to 1 hour between attempts, for 3 days; then the endpoint is disabled
  (\`disabled_reason: "failing"\`). A 410 disables it at once (\`"gone"\`). Enabled again (\`PATCH /webhook_endpoints/{endpoint_id}\`),
  it resumes where it stopped: nothing is lost.
- **Order.** Events of one contact come one at a time, in order: the next is posted only after the previous one was
  acknowledged. Different contacts are posted in parallel.
- **At least once.** An event may come more than once (a lost acknowledgement, a replay): de-duplicate by \`webhook-id\`.
- **Catching up.** An endpoint's \`delivery.cursor\` is an \`evc_\` cursor of \`GET /events\`: read what is pending there,
  or \`POST /webhook_endpoints/{endpoint_id}/replay\` to have it posted again.`;

/** OpenAPI 3.1 `webhooks`: one entry per event type, what your receiver is posted. */
export function buildWebhooks(schemas: Components): Json {
  const event = schemas.toJson(EventSchema);
  const parameters = Object.keys(WEBHOOK_PARAMETERS).map((name) => ({
    $ref: `#/components/parameters/${name}`,
  }));
  return Object.fromEntries(
    EVENT_TYPES.map((type, index) => [
      type,
      {
        post: {
          operationId: `${type.replace(/\.(\w)/, (_, c: string) => c.toUpperCase())}Webhook`,
          summary: `\`${type}\` event`,
          description: `${EVENT_MOMENTS[type]}\n\n${WEBHOOK_DELIVERY}`,
          tags: ["Webhooks"],
          // Your receiver authenticates the delivery by its signature, not by a credential of ours.
          security: [],
          parameters,
          requestBody: {
            required: true,
            description: `The \`${type}\` event, as JSON (\`content-type: application/json\`); the bytes the signature covers.`,
            content: {
              "application/json": {
                schema: event,
                examples: { [type]: { summary: `A \`${type}\` event`, value: exampleEvent(type, index) } },
              },
            },
          },
          responses: {
            "2XX": {
              description:
                "Acknowledged: this event is done for this endpoint, and the next one of the contact is posted.",
            },
            "410": {
              description:
                'Gone: the endpoint is disabled at once (`disabled_reason: "gone"`); nothing more is posted.',
            },
            default: {
              description:
                "Not acknowledged (as is a timeout after 10 seconds or a failed connection): retried with backoff, 5 seconds doubling to 1 hour, for 3 days.",
            },
          },
        },
      },
    ]),
  );
}
