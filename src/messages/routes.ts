import { Elysia } from "elysia";
import { DEFAULT_LIMITS } from "../http/rate-limit.ts";
import { requestState } from "../http/request-state.ts";
import { routePolicy } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { scopeGuard } from "../http/scope.ts";
import { admitSendRequest, type OutboundSending } from "./admission.ts";
import { KEY_FORMAT, parseIdempotencyKey } from "./idempotency.ts";
import { presentAcceptedMessage } from "./presenter.ts";
import { MessageSchema, SendMessageRequest, SendMessageRequestDocumented } from "./schemas.ts";

export function messageRoutes(sending: OutboundSending) {
  return new Elysia()
    .use(routePolicy)
    .use(scopeGuard)
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
                  template: {
                    summary: "An approved template",
                    value: {
                      to: "+4915123456789",
                      recipient_name: "Ana Silva",
                      template: {
                        name: "order_shipped",
                        language: "en",
                        variables: { body: { "1": "Ana", "2": "A-1" } },
                        buttons: { "0": "A-1" },
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
                        variables: { body: ["Ana"] },
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
    );
}
