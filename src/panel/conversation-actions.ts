import type { AppDeps } from "../app-deps.ts";
import type { ContactRow } from "../contacts/repository.ts";
import { ApiError } from "../http/errors.ts";
import { DEFAULT_LIMITS } from "../http/rate-limit.ts";
import type { AuthContext } from "../http/request-state.ts";
import type { OutboundSending } from "../messages/admission.ts";
import type { SendMessageInput } from "../messages/schemas.ts";
import {
  conversationState,
  newConversationView,
  openConversation,
  pathConversationContact,
  replyTemplates,
  requireConversationContact,
  senderTemplates,
} from "./conversation-data.ts";
import { CONVERSATIONS_PATH, contactLabel, conversationPath } from "./conversation-markup.ts";
import { conversationPage, newConversationPage, replyUpdate } from "./conversation-pages.ts";
import { idParam } from "./conversation-params.ts";
import {
  emptyReplyValues,
  newIdempotencyKey,
  type ReplyValues,
  readReplyForm,
  sendRequestOf,
} from "./conversation-reply.ts";
import { field, htmlResponse, type PanelContext, redirect } from "./web.ts";

/**
 * The Conversations section's forms: a reply, and the first message of a new conversation. Both send
 * through the API's send path as the signed-in user; a refused send shows the form again with what
 * was typed and why.
 */

const PANEL_SCOPES = ["messaging:send"] as const;

/**
 * The panel user sends as if they were an application of their tenant: its id stands in for the
 * client id, so `messages.application_id` records which panel user sent a reply, idempotency keys
 * are scoped to that user, and the user has an application's default limits.
 */
function panelAuth(ctx: PanelContext): AuthContext {
  return {
    clientId: ctx.session.userId,
    tenantId: ctx.session.tenantId,
    scopes: PANEL_SCOPES,
    readLimit: DEFAULT_LIMITS.read,
    sendLimit: DEFAULT_LIMITS.send,
  };
}

/** What the reply form says for a refused send: the API's message, or a plainer one. */
function refusalMessage(refusal: ApiError, contact: ContactRow): string {
  if (refusal.code === "recipient_opted_out") {
    return `Not sent: ${contactLabel(contact)} opted out of messages (they answered STOP, or were opted out through the API). Nothing can be sent to them until they write START again.`;
  }
  return refusal.message;
}

/**
 * A refused send's form again: what was typed, and why (a refusal does not use a key up). A key used
 * before for other content gets a new one, for the new message.
 */
function refusedValues(values: ReplyValues, refusal: ApiError, reused: string, message: string): ReplyValues {
  return refusal.code === "idempotency_key_reused"
    ? { ...values, idempotencyKey: newIdempotencyKey(), error: { message: reused, param: null } }
    : { ...values, error: { message, param: refusal.param } };
}

export function conversationActions(deps: AppDeps, sending: OutboundSending) {
  /**
   * POST /v2/messages without HTTP, through the process's one send path: admission (rate limit and
   * daily quota), then acceptance (window, templates, idempotency, group commit, send queue).
   */
  async function send(auth: AuthContext, input: SendMessageInput, idempotencyKey: string) {
    const admission = await sending.admitSend(
      auth,
      undefined,
      (limit) => `Too many messages at once: at most ${limit} per second. Wait a moment and send again.`,
    );
    return sending.acceptAdmitted(admission, auth, input, idempotencyKey);
  }

  /** POST /panel/conversations/new: send the template, then open the conversation. */
  async function startConversation(ctx: PanelContext): Promise<Response> {
    const values: ReplyValues = { ...readReplyForm(ctx.form), kind: "template" };
    const view = await newConversationView(
      deps.db,
      ctx.session.tenantId,
      ctx.csrf,
      idParam(field(ctx.form, "sender"), "snd"),
    );
    let refusal: ApiError | undefined;
    try {
      if (!view.sender) {
        throw new ApiError("parameter_invalid", "This account has no active number to send from.", {
          param: "sender",
        });
      }
      if (values.to.trim() === "") {
        throw new ApiError("parameter_missing", "Enter the customer's phone number.", { param: "to" });
      }
      const request = sendRequestOf(values, view.templates);
      const outcome = await send(
        panelAuth(ctx),
        { to: values.to.trim(), sender: view.sender.id, ...request },
        values.idempotencyKey,
      );
      return redirect(conversationPath(outcome.message.contactId), ctx.htmx);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      // The same form posted twice at once: the first post is sending it.
      if (error.code === "idempotency_key_in_use") return redirect(CONVERSATIONS_PATH, ctx.htmx);
      refusal = error;
    }
    const shown = refusedValues(
      values,
      refusal,
      "This form was already used to send a message. Check the conversations, then send again.",
      refusal.code === "recipient_opted_out"
        ? "Not sent: this customer opted out of messages (they answered STOP, or were opted out through the API). Nothing can be sent to them until they write START again."
        : refusal.message,
    );
    return htmlResponse(newConversationPage(ctx, view, shown), {
      status: refusal.status,
      headers: refusal.headers,
    });
  }

  /** POST /panel/conversations/:contactId/messages: a reply (free text or template). */
  async function reply(ctx: PanelContext): Promise<Response> {
    const tenantId = ctx.session.tenantId;
    const contact = await pathConversationContact(ctx);
    const state = await conversationState(deps.db, tenantId, contact, deps.clock.now());
    const values = readReplyForm(ctx.form);
    // A template reply reads the sender's templates (to find the chosen one).
    const templates =
      values.kind === "template" ? await senderTemplates(deps.db, tenantId, state.sender) : [];

    let refusal: ApiError | undefined;
    try {
      if (!state.sender) {
        throw new ApiError("messaging_window_closed", "This account has no active number to reply from.", {
          param: "sender",
        });
      }
      const request = sendRequestOf(values, templates);
      await send(
        panelAuth(ctx),
        { contact: contact.id, sender: state.sender.id, ...request },
        values.idempotencyKey,
      );
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      // The same form posted twice at once: the first post is sending it.
      if (error.code !== "idempotency_key_in_use") refusal = error;
    }

    if (!refusal && !ctx.htmx) return redirect(conversationPath(contact.id), false);

    // Re-read after the send: the thread has the new message, the window may have moved.
    const now = deps.clock.now();
    const fresh = await requireConversationContact(deps.db, tenantId, contact.id);
    const { state: after, thread } = await openConversation(deps.db, tenantId, fresh, now, undefined);
    // The form lists templates in any window state (a template reply read them already).
    const afterTemplates =
      values.kind === "template" && after.sender && after.sender.id === state.sender?.id
        ? templates
        : await replyTemplates(deps.db, tenantId, after);
    // A refused send keeps what was typed (and its key: a refusal does not use a key up).
    const shown: ReplyValues = !refusal
      ? emptyReplyValues()
      : refusedValues(
          values,
          refusal,
          "This form was already used to send a message (see the conversation). Check it, then send again.",
          refusalMessage(refusal, fresh),
        );

    if (!ctx.htmx) {
      return htmlResponse(
        await conversationPage(deps.db, ctx, {
          contact: fresh,
          state: after,
          templates: afterTemplates,
          thread,
          values: shown,
          now,
        }),
        { status: refusal?.status ?? 200, headers: refusal?.headers },
      );
    }
    // htmx swaps only 2xx answers: the refusal is shown in the form (role="alert") with 200.
    return htmlResponse(
      replyUpdate(ctx, {
        contact: fresh,
        state: after,
        templates: afterTemplates,
        thread,
        now,
        values: shown,
        autofocus: refusal ? undefined : values.kind,
      }),
      { headers: refusal ? { "x-panel-refusal": refusal.code } : {} },
    );
  }

  return { startConversation, reply };
}
