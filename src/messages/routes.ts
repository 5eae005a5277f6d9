import { type Static, t } from "elysia";
import { ApiError, apiErrorBody } from "../http/errors.ts";
import { DEFAULT_LIMITS } from "../http/rate-limit.ts";
import { requestState } from "../http/request-state.ts";
import { ErrorResponse, listOf, standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import { admitSendRequest, type OutboundSending } from "./admission.ts";
import {
  BATCH_MAX_ITEMS,
  type BatchItemResult,
  SendBatchRequest,
  SendBatchRequestDocumented,
} from "./batch.ts";
import { KEY_FORMAT, parseIdempotencyKey } from "./idempotency.ts";
import { presentAcceptedMessage } from "./presenter.ts";
import { MessageSchema, SendMessageRequest, SendMessageRequestDocumented } from "./schemas.ts";

const BatchResultSchema = t.Object(
  {
    object: t.Literal("batch_result"),
    index: t.Integer({ description: "The item's position in `messages` (from 0)." }),
    status: t.Integer({
      description:
        "The HTTP status the item would have had alone: 201 accepted, 200 a replay of its `idempotency_key`, 400/404/409/429 refused, 500/503 failed on our side (retry the item, with its `idempotency_key`).",
    }),
    message: t.Nullable(MessageSchema),
    // The envelope's error object (its schema, typed as apiErrorBody writes it).
    error: t.Nullable(t.Unsafe<ErrorObject>(ErrorResponse.properties.error)),
  },
  {
    title: "BatchResult",
    description:
      "One item's outcome: `message` when accepted or replayed, else `error` (its `param` relative to the item).",
  },
);

type ErrorObject = ReturnType<typeof apiErrorBody>["error"];

const BatchResultList = listOf(BatchResultSchema, "One row per item, in item order.");

function presentBatchResult(
  result: BatchItemResult,
  requestId: string,
  baseUrl: string,
): Static<typeof BatchResultSchema> {
  return {
    object: "batch_result" as const,
    index: result.index,
    status: result.status,
    message: "outcome" in result ? presentAcceptedMessage(result.outcome.message) : null,
    error: "error" in result ? apiErrorBody(result.error, requestId, baseUrl).error : null,
  };
}

export function messageRoutes(sending: OutboundSending, publicBaseUrl: string) {
  return apiRoutes()
    .post(
      "/messages",
      async ({ auth, body, request, set }) => {
        const key = parseIdempotencyKey(request.headers.get("idempotency-key"));
        // The pipeline admitted this send (the route's policy); its quota unit is kept or given back by
        // the outcome. A send that arrives without an admission is admitted here or refused, never
        // accepted for free.
        const state = requestState(request);
        if (!state) throw new Error("a send reached its route without a request state");
        if (!state.admittedSend) await admitSendRequest(sending.admitSend, auth, request, state, set);
        const outcome = await sending.acceptAdmitted(state.admittedSend, auth, body, key);
        if (outcome.replayed) {
          set.status = 200;
          set.headers["idempotency-replayed"] = "true";
        } else {
          set.status = 201;
        }
        return presentAcceptedMessage(outcome.message);
      },
      {
        // Rate limit, a unit of the daily quota and the Idempotency-Key, in one Redis call, before the body.
        policy: { limit: "send-admission", body: "api" },
        scope: "messaging:send",
        body: SendMessageRequest,
        response: {
          200: MessageSchema,
          201: MessageSchema,
          ...standardErrors(
            "parameter_conflict",
            "parameter_missing",
            "parameter_invalid",
            "parameter_unknown",
            "invalid_json",
            "invalid_content_type",
            "template_not_found",
            "idempotency_key_reused",
            "media_expired",
            "resource_missing",
            "messaging_window_closed",
            "recipient_phone_required",
            "idempotency_key_in_use",
            "request_too_large",
            "quota_exceeded",
          ),
        },
        detail: {
          operationId: "sendMessage",
          summary: "Send a message",
          description: `Sends an approved template, or free text inside the 24-hour window. With an \`Idempotency-Key\`, a repeated request returns the original message (200, \`Idempotency-Replayed: true\`) and sends nothing again. Counts against the send limit (${DEFAULT_LIMITS.send} per second) and the daily per-channel quota.`,
          tags: ["Messages"],
          parameters: [
            {
              name: "Idempotency-Key",
              in: "header",
              required: false,
              schema: { type: "string", minLength: 1, maxLength: 255, pattern: KEY_FORMAT.source },
              description:
                "1-255 printable ASCII characters, scoped to your application and kept 24 hours. The same key with the same body returns the original message; with another body, 400 `idempotency_key_reused`.",
            },
          ],
          requestBody: {
            // The service checks the exclusive pairs itself, each mistake with its own code.
            schema: SendMessageRequestDocumented,
            content: {
              "application/json": {
                examples: {
                  // Sent as it is, against the sandbox's own order_shipped (body {{1}}, {{2}}; no
                  // buttons), it is accepted: 201 (test/docs/openapi-example.test.ts).
                  template: {
                    summary: "An approved template",
                    value: {
                      to: "+4915123456789",
                      recipient_name: "Ana Silva",
                      template: {
                        name: "order_shipped",
                        language: "en",
                        variables: { body: { "1": "Ana", "2": "A-1001" } },
                      },
                    },
                  },
                  buttons: {
                    summary: "A template with a URL button",
                    value: {
                      to: "+4915123456789",
                      template: {
                        name: "appointment_reminder",
                        language: "en",
                        header: "Ana",
                        variables: { body: ["May 4", "10:30"] },
                        buttons: { "0": "ABC123" },
                      },
                    },
                  },
                  document: {
                    summary: "A template with a document header",
                    value: {
                      contact: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY",
                      template: {
                        name: "invoice_ready",
                        header: {
                          type: "document",
                          media: "med_5Gh7Jk9Lm1Np3Qr5St7Uv9",
                          filename: "invoice-A-1.pdf",
                        },
                        variables: { body: ["INV-2041"] },
                      },
                    },
                  },
                  text: {
                    summary: "Free text (inside the 24-hour window)",
                    value: {
                      contact: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY",
                      body: "Your parcel arrives today between 10:00 and 12:00.",
                    },
                  },
                },
              },
            },
          },
          responses: {
            200: {
              description:
                "Replay: this `Idempotency-Key` was used before with the same body. The original message; nothing is sent again.",
              headers: {
                "Idempotency-Replayed": {
                  description: "`true` on a replay.",
                  schema: { type: "string", enum: ["true"] },
                },
              },
            },
            201: { description: "Accepted and forwarded to the channel provider." },
          },
        },
      },
    )
    .post(
      "/messages/batch",
      async ({ auth, body, request, set }) => {
        if (request.headers.has("idempotency-key")) {
          throw new ApiError(
            "parameter_invalid",
            "A batch takes no Idempotency-Key header: give each item its own idempotency_key.",
            { param: "Idempotency-Key" },
          );
        }
        const state = requestState(request);
        const results = await sending.acceptBatch(auth, body.messages, state?.requestId);
        const list: Static<typeof BatchResultList> = {
          object: "list" as const,
          url: new URL(request.url).pathname,
          has_more: false,
          data: results.map((result) => presentBatchResult(result, state?.requestId ?? "", publicBaseUrl)),
        };
        // Serialized here: Elysia's encoding of a response against its schema walks every value of
        // 1,000 Messages (a tenth of the api's CPU for a batch). The schema still documents it, and
        // the `list` above is typed by it.
        return new Response(JSON.stringify(list), {
          headers: { ...(set.headers as Record<string, string>), "content-type": "application/json" },
        });
      },
      {
        // One unit of the send limit for the call, before the body; the daily quota per item.
        policy: { limit: "send", body: "batch" },
        scope: "messaging:send",
        body: SendBatchRequest,
        response: {
          200: BatchResultList,
          ...standardErrors(
            "parameter_missing",
            "parameter_invalid",
            "parameter_unknown",
            "invalid_json",
            "invalid_content_type",
            "request_too_large",
          ),
        },
        detail: {
          operationId: "sendMessageBatch",
          summary: "Send a batch of messages",
          description: `Up to ${BATCH_MAX_ITEMS} sends in one call, each validated and answered on its own: 200 with one \`batch_result\` per item, in item order, whose \`status\` is what the item would have had alone (201, 200 for a replay, 400/404/409/429, 500/503 when it failed on our side) with its \`message\` or its \`error\` (\`param\` relative to the item, e.g. \`template.name\`). An item that fails answers in its own row; the call as a whole answers 5xx only when none of its items was stored. Give each item its own \`idempotency_key\` (an \`Idempotency-Key\` header is refused): a retried batch then sends nothing twice. The call spends one unit of the send limit (${DEFAULT_LIMITS.send} per second; 429 for the whole call); each accepted item spends one unit of the daily quota, and the items past it (the last ones) get 429 \`quota_exceeded\` in their row. Messages to one contact are handed to the provider in item order.`,
          tags: ["Messages"],
          requestBody: {
            schema: SendBatchRequestDocumented,
            content: {
              "application/json": {
                examples: {
                  batch: {
                    summary: "Two order notices, each with its own key",
                    value: {
                      messages: [
                        {
                          to: "+4915123456789",
                          template: { name: "order_shipped", variables: { body: ["Ana", "A-1"] } },
                          client_reference: "order-A-1",
                          idempotency_key: "order-A-1-shipped",
                        },
                        {
                          to: "+4915123456780",
                          template: { name: "order_shipped", variables: { body: ["Ben", "A-2"] } },
                          client_reference: "order-A-2",
                          idempotency_key: "order-A-2-shipped",
                        },
                      ],
                    },
                  },
                },
              },
            },
          },
        },
      },
    );
}
