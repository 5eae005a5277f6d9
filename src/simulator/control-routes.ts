import { Elysia, t } from "elysia";
import { buildWebhook, webhookTimestamp } from "../channel/webhook-payloads.ts";
import { ControlError, controlErrorResponse, describeFailure, describeValidation } from "./errors.ts";
import {
  FailNextRequest,
  INBOUND_FIELDS,
  InboundRequest,
  MpsRequest,
  SlowNextRequest,
  StatusRequest,
  TYPE_SPECIFIC_FIELDS,
} from "./schemas.ts";
import { resetSimulatorState, type SimulatorLog, type SimulatorState } from "./state.ts";
import { inboundWebhook, statusErrors, statusUpdate, webhookAccount } from "./webhook-bodies.ts";
import type { WebhookSender } from "./webhook-sender.ts";

/**
 * The control API under /_sim: driving inbound messages, statuses and failures, reading what was
 * sent, and resetting.
 */

export function controlRoutes(state: SimulatorState, webhooks: WebhookSender, log: SimulatorLog) {
  return new Elysia({ prefix: "/_sim" })
    .onError(({ code, error }) => {
      if (error instanceof ControlError) return controlErrorResponse(error.message, error.status);
      if (code === "VALIDATION") {
        return controlErrorResponse(
          describeValidation(error, (path) => path.replace(/^\//, "").replaceAll("/", ".") || "request body"),
        );
      }
      if (code === "PARSE") return controlErrorResponse("The request body must be JSON.");
      log(`unexpected error: ${describeFailure(error)}`);
      return controlErrorResponse("The simulator failed; see its log.", 500);
    })
    .get("/health", () => ({ status: "ok" }))
    .post(
      "/inbound",
      async ({ body }) => {
        const misplaced = TYPE_SPECIFIC_FIELDS.find(
          (field) => body[field] !== undefined && !INBOUND_FIELDS[body.type].allowed.includes(field),
        );
        if (misplaced) throw new ControlError(`${misplaced} does not apply to type ${body.type}`);
        const { webhook, message, waId } = inboundWebhook(state, body);
        const outcome = await webhooks.postWebhookOnce(webhook, body.phone_number_id);
        log(
          `inbound ${body.type} ${message.id} from ${waId}: webhook answered ${outcome.webhook_status ?? outcome.webhook_error}`,
        );
        return { id: message.id, ...outcome };
      },
      { body: InboundRequest },
    )
    .post(
      "/status",
      async ({ body }) => {
        const send = state.accepted.get(body.wamid);
        const phoneNumberId = body.phone_number_id ?? send?.phoneNumberId;
        const recipientId = body.recipient_id ?? send?.waId;
        if (!phoneNumberId || !recipientId) {
          throw new ControlError(`unknown wamid ${body.wamid}: give phone_number_id and recipient_id`);
        }
        if (body.errors && body.status !== "failed") throw new ControlError("errors go with status failed");
        const timestamp = body.timestamp === undefined ? webhookTimestamp() : String(body.timestamp);
        const errors = body.status === "failed" ? statusErrors(body.errors) : undefined;
        const webhook = buildWebhook(webhookAccount({ ...body, phoneNumberId }), {
          statuses: [statusUpdate(body.wamid, body.status, recipientId, timestamp, errors)],
        });
        const outcome = await webhooks.postWebhookOnce(webhook, phoneNumberId);
        log(
          `status ${body.status} ${body.wamid}: webhook answered ${outcome.webhook_status ?? outcome.webhook_error}`,
        );
        return outcome;
      },
      { body: StatusRequest },
    )
    .get(
      "/sent",
      ({ query }) => {
        // `from`: the number of sends already read (a follower's position: sends are numbered from 0
        // in arrival order, forgotten ones included), so a long run reads each send once.
        const from = query.from === undefined ? 0 : Math.max(0, Number(query.from) - state.forgottenSends);
        const window = from > 0 ? state.sent.slice(from) : state.sent;
        return {
          data: query.phone_number_id
            ? window.filter((record) => record.phone_number_id === query.phone_number_id)
            : window,
          forgotten: state.forgottenSends,
          total: state.forgottenSends + state.sent.length,
        };
      },
      {
        query: t.Object({
          phone_number_id: t.Optional(t.String()),
          from: t.Optional(t.Numeric({ minimum: 0 })),
        }),
      },
    )
    .post(
      "/fail-next",
      ({ body }) => {
        for (let i = 0; i < body.count; i++) state.pendingFailures.push(body.code);
        log(`the next ${body.count} sends fail with ${body.code}`);
        return { pending_failures: state.pendingFailures.length };
      },
      { body: FailNextRequest },
    )
    .post(
      "/mps",
      ({ body }) => {
        state.mps = body.mps;
        state.buckets.clear();
        log(
          body.mps > 0
            ? `throughput limited to ${body.mps} sends per second per number`
            : "throughput unlimited",
        );
        return { mps: state.mps };
      },
      { body: MpsRequest },
    )
    .post(
      "/slow-next",
      ({ body }) => {
        for (let i = 0; i < body.count; i++) state.pendingDelays.push(body.delay_ms);
        log(`the next ${body.count} sends answer after ${body.delay_ms} ms`);
        return { pending_delays: state.pendingDelays.length };
      },
      { body: SlowNextRequest },
    )
    .post("/reset", () => {
      resetSimulatorState(state);
      log("reset");
      return { reset: true };
    });
}
