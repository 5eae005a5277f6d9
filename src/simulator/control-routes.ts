import { Elysia, t } from "elysia";
import {
  buildWebhook,
  type InboundMessage,
  type MessageStamp,
  userChangedNumberMessage,
  userChangedUserIdMessage,
  type WireUser,
  webhookTimestamp,
} from "../channel/webhook-payloads.ts";
import { ControlError, controlErrorResponse, describeFailure, describeValidation } from "./errors.ts";
import { newWamid } from "./ids.ts";
import {
  ChangeNumberRequest,
  ChangeUserIdRequest,
  FailNextRequest,
  INBOUND_FIELDS,
  InboundRequest,
  MpsRequest,
  SlowNextRequest,
  StatusRequest,
  TYPE_SPECIFIC_FIELDS,
} from "./schemas.ts";
import { resetSimulatorState, type SimUser, type SimulatorLog, type SimulatorState } from "./state.ts";
import { changeNumber, changeUserId, userByPhone, userByUserId, wireUserOf } from "./users.ts";
import { inboundWebhook, statusErrors, statusUpdate, webhookAccount } from "./webhook-bodies.ts";
import type { WebhookSender } from "./webhook-sender.ts";

/**
 * The control API under /_sim: driving inbound messages, statuses, users' number and BSUID changes
 * and failures, reading what was sent, and resetting.
 */

/**
 * Whom a /_sim/status is about: as the call names them (`recipient_id`, `recipient_user_id`; a
 * given phone is carried), else as the send went; undefined when neither says.
 */
function statusRecipient(
  state: SimulatorState,
  body: StatusRequest,
  sent: WireUser | undefined,
): WireUser | undefined {
  if (body.recipient_id === undefined && body.recipient_user_id === undefined) return sent;
  const phone = body.recipient_id?.replace(/^\+/, "") ?? null;
  const user =
    body.recipient_user_id !== undefined
      ? userByUserId(state, body.recipient_user_id)
      : userByPhone(state, phone as string);
  const named = wireUserOf(user);
  return phone === null ? named : { ...named, phone, phoneShared: true };
}

export function controlRoutes(state: SimulatorState, webhooks: WebhookSender, log: SimulatorLog) {
  /**
   * A user-change call (/users/change_number, /users/change_user_id): the user's message, built as
   * the webhook names them before the change; the change (which may refuse it, posting nothing); the
   * message posted once.
   */
  const postUserChange = async (
    body: ChangeNumberRequest | ChangeUserIdRequest,
    buildMessage: (user: WireUser, stamp: MessageStamp) => InboundMessage,
    change: (user: SimUser) => void,
    description: string,
  ) => {
    const user = userByUserId(state, body.user_id);
    const message = buildMessage(wireUserOf(user, body.name), {
      id: newWamid(),
      timestamp: webhookTimestamp(),
    });
    change(user);
    const webhook = buildWebhook(webhookAccount({ ...body, phoneNumberId: body.phone_number_id }), {
      messages: [message],
    });
    const outcome = await webhooks.postWebhookOnce(webhook, body.phone_number_id);
    log(`${description}: webhook answered ${outcome.webhook_status ?? outcome.webhook_error}`);
    return { id: message.id, ...outcome };
  };

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
        const { webhook, message, author } = inboundWebhook(state, body);
        const outcome = await webhooks.postWebhookOnce(webhook, body.phone_number_id);
        log(
          `inbound ${body.type} ${message.id} from ${author}: webhook answered ${outcome.webhook_status ?? outcome.webhook_error}`,
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
        const recipient = statusRecipient(state, body, send?.recipient);
        if (!phoneNumberId || !recipient) {
          throw new ControlError(
            `unknown wamid ${body.wamid}: give phone_number_id and recipient_id or recipient_user_id`,
          );
        }
        if (body.errors && body.status !== "failed") throw new ControlError("errors go with status failed");
        const timestamp = body.timestamp === undefined ? webhookTimestamp() : String(body.timestamp);
        const errors = body.status === "failed" ? statusErrors(body.errors) : undefined;
        const webhook = buildWebhook(webhookAccount({ ...body, phoneNumberId }), {
          statuses: [statusUpdate(body.wamid, body.status, recipient, timestamp, errors)],
        });
        const outcome = await webhooks.postWebhookOnce(webhook, phoneNumberId);
        log(
          `status ${body.status} ${body.wamid}: webhook answered ${outcome.webhook_status ?? outcome.webhook_error}`,
        );
        return outcome;
      },
      { body: StatusRequest },
    )
    .post(
      "/users/change_number",
      ({ body }) => {
        const newPhone = body.new_phone.replace(/^\+/, "");
        return postUserChange(
          body,
          (user, stamp) => userChangedNumberMessage(user, newPhone, stamp),
          (user) => changeNumber(state, user, newPhone),
          `user ${body.user_id} changed number to +${newPhone}`,
        );
      },
      { body: ChangeNumberRequest },
    )
    .post(
      "/users/change_user_id",
      ({ body }) =>
        postUserChange(
          body,
          (user, stamp) => userChangedUserIdMessage(user, body.new_user_id, stamp),
          (user) => changeUserId(state, user, body.new_user_id),
          `user ${body.user_id} changed BSUID to ${body.new_user_id}`,
        ),
      { body: ChangeUserIdRequest },
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
