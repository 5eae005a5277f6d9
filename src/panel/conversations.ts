import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { type DownloadedMedia, ProviderError } from "../channel/provider.ts";
import type { ContactRow } from "../contacts/repository.ts";
import { ApiError } from "../http/errors.ts";
import { DEFAULT_LIMITS } from "../http/rate-limit.ts";
import { type AuthContext, requestState } from "../http/request-state.ts";
import { type IdPrefix, isId } from "../ids.ts";
import type { SendMessageInput } from "../messages/accept.ts";
import type { OutboundSending } from "../messages/admission.ts";
import { listActiveSenders, senderCredentials } from "../senders/repository.ts";
import { listApprovedTemplates, type TemplateRow } from "../templates/repository.ts";
import {
  type ConversationState,
  conversationState,
  inboundMediaSource,
  type ListNarrowing,
  listFilterOf,
  listSearchOf,
  markConversationRead,
  messageDetails,
  requireConversationContact,
  type ThreadPage,
  tenantUnread,
  threadPage,
} from "./conversation-data.ts";
import { listRegion, renderSidebar } from "./conversation-list.ts";
import {
  emptyReplyValues,
  NEW_CONVERSATION_PATH,
  type NewConversationView,
  type ReplyValues,
  type ReplyView,
  readReplyForm,
  renderNewConversation,
  renderReply,
  renderReplyText,
  sendRequestOf,
} from "./conversation-reply.ts";
import {
  announce,
  announcer,
  CONVERSATIONS_PATH,
  contactLabel,
  conversationPath,
  listPath,
  listTitle,
  localTime,
  renderListToolbar,
  renderMessageDetailsBody,
  renderMessageTimeline,
  renderThreadRegion,
  renderWindowState,
  titleUpdate,
} from "./conversation-views.ts";
import { type Html, html } from "./html.ts";
import { mediaResponse } from "./inbound-media.ts";
import { errorPage, page } from "./layout.ts";
import { PANEL_PREFIX } from "./paths.ts";
import { renderTemplateFields } from "./template-form.ts";
import { field, htmlResponse, type PanelContext, redirect, signedIn } from "./web.ts";

/**
 * Conversations (issue 6 §4): the list, one conversation's history, marking it read, replying.
 *
 * Routes (all signed in, tenant-scoped; another tenant's contact is the same 404 as an unknown id):
 *   GET  /panel/conversations                       the list, newest first (`?before=` epoch seconds: older;
 *                                                   `?filter=unread|open|failed`, `?q=` name or phone)
 *   GET  /panel/conversations/list?v=&u=&current=&filter=&q=   the list region alone, polled; 204 while unchanged
 *   GET  /panel/conversations/new?sender=&template= start a conversation: a phone number and a template
 *   POST /panel/conversations/new                   send it (the reply's send path), then open the conversation
 *   GET  /panel/conversations/:contactId            the conversation (`?before=msg_…` earlier messages,
 *                                                   `?template=tpl_…` that template's variables,
 *                                                   `?filter=&q=` its sidebar's narrowing)
 *   GET  /panel/conversations/:contactId/thread?v=&last=&mode=   the thread region, polled; 204 while unchanged
 *   GET  /panel/conversations/:contactId/messages/:messageId     a message's details (htmx: its timeline)
 *   GET  /panel/conversations/:contactId/messages/:messageId/media   a received message's image (inline)
 *                                                   or file (a download), fetched from the provider
 *   POST /panel/conversations/:contactId/messages   reply (free text or template) through the API's send path
 */

const PANEL_SCOPES = ["messaging:send"] as const;

/** A poll's conditional parameters are opaque to the client; anything else is ignored. */
function idParam(value: string | undefined, prefix: IdPrefix): string | undefined {
  return value !== undefined && isId(value, prefix) ? value : undefined;
}

function beforeSeconds(value: string | undefined): number | undefined {
  return /^\d{1,12}$/.test(value ?? "") ? Number(value) : undefined;
}

/** What the reply form says for a refused send: the API's message, or a plainer one. */
function refusalMessage(refusal: ApiError, contact: ContactRow): string {
  if (refusal.code === "recipient_opted_out") {
    return `Not sent: ${contactLabel(contact)} opted out of messages (they answered STOP, or were opted out through the API). Nothing can be sent to them until they write START again.`;
  }
  return refusal.message;
}

function notModified(): Response {
  return new Response(null, { status: 204, headers: { "cache-control": "no-store" } });
}

export function conversationPages(deps: AppDeps, sending: OutboundSending) {
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

  /** The sender's approved templates: offered in every reply box that can send (any window state). */
  function replyTemplates(tenantId: string, state: ConversationState): Promise<TemplateRow[]> {
    return (state.mode === "text" || state.mode === "template") && state.sender
      ? listApprovedTemplates(deps.db, tenantId, state.sender.id)
      : Promise.resolve([]);
  }

  function narrowingOf(query: Record<string, string | undefined>): ListNarrowing {
    return { filter: listFilterOf(query.filter), q: listSearchOf(query.q) };
  }

  /** The new-conversation page's numbers and templates (`?sender=` picks one of several). */
  async function newConversationView(
    ctx: PanelContext,
    senderId: string | undefined,
  ): Promise<NewConversationView> {
    const senders = await listActiveSenders(deps.db, ctx.session.tenantId);
    const sender = senders.find((s) => s.id === senderId) ?? senders[0];
    const templates = sender ? await listApprovedTemplates(deps.db, ctx.session.tenantId, sender.id) : [];
    return { csrf: ctx.csrf, senders, sender, templates };
  }

  function newConversationPage(ctx: PanelContext, view: NewConversationView, values: ReplyValues): Html {
    return page({
      title: "New conversation · Conversations",
      section: "conversations",
      session: ctx.session,
      csrf: ctx.csrf,
      body: html`<p class="conversation-back"><a href="${CONVERSATIONS_PATH}"><span aria-hidden="true">←</span> All conversations</a></p>
<div class="page-head">
<h1>New conversation</h1>
<p class="muted">Write first to a customer: a conversation starts with an approved template (free text only once they answer).</p>
</div>
${renderNewConversation(view, values)}`,
    });
  }

  function replyView(
    ctx: PanelContext,
    contact: ContactRow,
    state: ConversationState,
    templates: TemplateRow[],
    now: Date,
  ): ReplyView {
    return {
      contactId: contact.id,
      contactName: contactLabel(contact),
      csrf: ctx.csrf,
      state,
      templates,
      now,
    };
  }

  function threadRegion(
    contact: ContactRow,
    state: ConversationState,
    thread: ThreadPage,
    now: Date,
    oob = false,
  ) {
    return renderThreadRegion({
      contactId: contact.id,
      contactName: contactLabel(contact),
      thread,
      now,
      poll: { mode: state.mode, windowState: renderWindowState(state, now) },
      oob,
    });
  }

  async function conversationPage(
    ctx: PanelContext,
    input: {
      contact: ContactRow;
      state: ConversationState;
      templates: TemplateRow[];
      thread: ThreadPage;
      before?: string;
      values: ReplyValues;
      now: Date;
      /** The sidebar's filter and search. */
      narrowing?: ListNarrowing;
    },
  ): Promise<Html> {
    const { contact, state, thread, now } = input;
    const narrowing = input.narrowing ?? {};
    const name = contactLabel(contact);
    const sidebar = await listRegion(deps.db, ctx.session.tenantId, now, { current: contact.id, narrowing });
    const region =
      input.before === undefined
        ? threadRegion(contact, state, thread, now)
        : renderThreadRegion({ contactId: contact.id, contactName: name, thread, now, before: input.before });
    return page({
      title: `${name} · Conversations`,
      section: "conversations",
      session: ctx.session,
      csrf: ctx.csrf,
      body: html`<div class="conversation-layout">
<a class="skip-link" href="#conversation">Skip to the conversation</a>
${renderSidebar(contact.id, narrowing, sidebar.html)}
<div class="conversation-main" id="conversation">
<p class="conversation-back"><a href="${listPath(narrowing)}"><span aria-hidden="true">←</span> All conversations</a></p>
<header class="conversation-head">
<h1>${name}</h1>
<p class="conversation-contact">${contact.name?.trim() ? html`<span class="mono">${contact.phone}</span> · ` : ""}WhatsApp</p>
${renderWindowState(state, now)}
</header>
<section class="thread-section" aria-labelledby="thread-title">
<h2 id="thread-title" class="visually-hidden">Messages</h2>
${announcer("thread-announce")}
<div class="thread-scroll" tabindex="0" role="region" aria-label="Message history">
${region.html}
</div>
</section>
${renderReply(replyView(ctx, contact, state, input.templates, now), input.values)}
</div>
</div>`,
    });
  }

  /** What a thread poll or an htmx send brings besides the thread: window line, announcements. */
  function threadUpdates(
    contact: ContactRow,
    state: ConversationState,
    thread: ThreadPage,
    now: Date,
    last: string | undefined,
  ): Html {
    const lastIndex = last === undefined ? -1 : thread.rows.findIndex((row) => row.id === last);
    const fresh = thread.rows.slice(lastIndex + 1).filter((row) => row.direction === "inbound").length;
    const name = contactLabel(contact);
    return html`${renderWindowState(state, now, true)}${
      fresh > 0
        ? announce("thread-announce", `${fresh} new message${fresh === 1 ? "" : "s"} from ${name}`)
        : ""
    }`;
  }

  return new Elysia({ prefix: PANEL_PREFIX })
    .get(
      "/conversations",
      signedIn(deps, async (ctx) => {
        const now = deps.clock.now();
        const before = beforeSeconds(ctx.query.before);
        const narrowing = narrowingOf(ctx.query);
        const [region, unread] = await Promise.all([
          listRegion(deps.db, ctx.session.tenantId, now, { before, narrowing }),
          tenantUnread(deps.db, ctx.session.tenantId),
        ]);
        return htmlResponse(
          page({
            title: listTitle(unread),
            section: "conversations",
            session: ctx.session,
            csrf: ctx.csrf,
            body: html`<div class="page-head">
<div class="page-head-row">
<h1>Conversations</h1>
<a id="new-conversation-link" class="button primary" href="${NEW_CONVERSATION_PATH}">New conversation</a>
</div>
<p class="muted">Newest first. New messages appear here without reloading.</p>
</div>
${renderListToolbar(narrowing)}
${announcer("conversations-announce")}
${region.html}`,
          }),
        );
      }),
    )

    .get(
      "/conversations/list",
      signedIn(deps, async (ctx) => {
        const now = deps.clock.now();
        const current = idParam(ctx.query.current, "ctc");
        const narrowing = narrowingOf(ctx.query);
        const region = await listRegion(deps.db, ctx.session.tenantId, now, { current, narrowing });
        if (ctx.query.v === region.version) return notModified();
        // The list page's tab title carries the unread count (a conversation's page has its own title).
        const title =
          current === undefined ? titleUpdate(await tenantUnread(deps.db, ctx.session.tenantId)) : "";
        const before = /^\d{1,9}$/.test(ctx.query.u ?? "") ? Number(ctx.query.u) : 0;
        const news =
          region.unread > before
            ? announce(
                "conversations-announce",
                `New messages: ${region.unread} unread message${region.unread === 1 ? "" : "s"}`,
              )
            : "";
        return htmlResponse(html`${title}${region.html}${news}`);
      }),
    )

    .get(
      "/conversations/new",
      signedIn(deps, async (ctx) => {
        const view = await newConversationView(ctx, idParam(ctx.query.sender, "snd"));
        const values = emptyReplyValues(idParam(ctx.query.template, "tpl") ?? "");
        if (ctx.htmx && ctx.request.headers.get("hx-target") === "template-fields") {
          return htmlResponse(renderTemplateFields(view.templates, values));
        }
        return htmlResponse(newConversationPage(ctx, view, { ...values, kind: "template" }));
      }),
    )

    .post(
      "/conversations/new",
      signedIn(deps, async (ctx) => {
        const values: ReplyValues = { ...readReplyForm(ctx.form), kind: "template" };
        const view = await newConversationView(ctx, idParam(field(ctx.form, "sender"), "snd"));
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
        const shown: ReplyValues =
          refusal.code === "idempotency_key_reused"
            ? {
                ...values,
                idempotencyKey: emptyReplyValues().idempotencyKey,
                error: {
                  message:
                    "This form was already used to send a message. Check the conversations, then send again.",
                  param: null,
                },
              }
            : {
                ...values,
                error: {
                  message:
                    refusal.code === "recipient_opted_out"
                      ? "Not sent: this customer opted out of messages (they answered STOP, or were opted out through the API). Nothing can be sent to them until they write START again."
                      : refusal.message,
                  param: refusal.param,
                },
              };
        return htmlResponse(newConversationPage(ctx, view, shown), {
          status: refusal.status,
          headers: refusal.headers,
        });
      }),
    )

    .get(
      "/conversations/:contactId/messages/:messageId",
      signedIn(deps, async (ctx) => {
        const tenantId = ctx.session.tenantId;
        const contact = await requireConversationContact(deps.db, tenantId, ctx.params.contactId ?? "");
        const details = await messageDetails(deps.db, tenantId, contact.id, ctx.params.messageId ?? "");
        const now = deps.clock.now();
        const timeline = renderMessageTimeline(details, now);
        if (ctx.htmx) return htmlResponse(timeline);
        const { message } = details;
        const name = contactLabel(contact);
        return htmlResponse(
          page({
            title: `Message ${message.id} · ${name} · Conversations`,
            section: "conversations",
            session: ctx.session,
            csrf: ctx.csrf,
            body: html`<p class="conversation-back"><a href="${conversationPath(contact.id)}#message-${message.id}"><span aria-hidden="true">←</span> Conversation with ${name}</a></p>
<div class="page-head">
<h1>Message details</h1>
<p class="muted">${message.direction === "outbound" ? `To ${name}` : `From ${name}`} · ${localTime(message.created_at)}</p>
</div>
<section class="card message-page" aria-labelledby="message-details-title">
<h2 id="message-details-title" class="visually-hidden">Details</h2>
${renderMessageDetailsBody(details, contact.id, name)}
${timeline}
</section>`,
          }),
        );
      }),
    )

    .get(
      "/conversations/:contactId/messages/:messageId/media",
      signedIn(deps, async (ctx) => {
        const tenantId = ctx.session.tenantId;
        const contact = await requireConversationContact(deps.db, tenantId, ctx.params.contactId ?? "");
        const source = await inboundMediaSource(deps.db, tenantId, contact.id, ctx.params.messageId ?? "");
        let media: DownloadedMedia;
        try {
          // Fetched with the token of the number that received it, when a person opens it.
          const credentials = senderCredentials(deps.config.providerTokenKey, source.sender);
          media = await deps.provider.downloadMedia(credentials, source.mediaId);
        } catch (error) {
          if (!(error instanceof ProviderError)) throw error;
          const requestId = requestState(ctx.request)?.requestId;
          deps.logger.warn(
            { request_id: requestId, code: error.code, err: error.message },
            "panel: inbound media could not be fetched",
          );
          const what = source.mediaType === "image" ? "picture" : "file";
          return htmlResponse(
            errorPage(
              502,
              `The ${what} could not be fetched`,
              `WhatsApp did not hand over this ${what} (${error.message}). ${
                error.retryable
                  ? "WhatsApp may be briefly unavailable: try again in a moment."
                  : "WhatsApp keeps received media for a limited time, so it may have expired; ask the customer to send it again."
              }`,
              requestId,
            ),
            { status: 502, headers: requestId ? { "request-id": requestId } : {} },
          );
        }
        return mediaResponse(source, media);
      }),
    )

    .get(
      "/conversations/:contactId",
      signedIn(deps, async (ctx) => {
        const tenantId = ctx.session.tenantId;
        const contact = await requireConversationContact(deps.db, tenantId, ctx.params.contactId ?? "");
        const now = deps.clock.now();
        const templateId = idParam(ctx.query.template, "tpl") ?? "";
        if (ctx.htmx && ctx.request.headers.get("hx-target") === "template-fields") {
          // The template picker changed: only its variables fieldset.
          const state = await conversationState(deps.db, tenantId, contact, now);
          const templates = state.sender
            ? await listApprovedTemplates(deps.db, tenantId, state.sender.id)
            : [];
          return htmlResponse(renderTemplateFields(templates, emptyReplyValues(templateId)));
        }
        await markConversationRead(deps.db, tenantId, contact.id, now);
        const before = ctx.query.before || undefined;
        const [state, thread] = await Promise.all([
          conversationState(deps.db, tenantId, contact, now),
          threadPage(deps.db, tenantId, contact.id, before),
        ]);
        const templates = await replyTemplates(tenantId, state);
        return htmlResponse(
          await conversationPage(ctx, {
            contact,
            state,
            templates,
            thread,
            before,
            values: emptyReplyValues(templateId),
            now,
            narrowing: narrowingOf(ctx.query),
          }),
        );
      }),
    )

    .get(
      "/conversations/:contactId/thread",
      signedIn(deps, async (ctx) => {
        const tenantId = ctx.session.tenantId;
        const contact = await requireConversationContact(deps.db, tenantId, ctx.params.contactId ?? "");
        const now = deps.clock.now();
        // Watching the conversation keeps it read: what arrives while it is open is seen.
        await markConversationRead(deps.db, tenantId, contact.id, now);
        const [state, thread] = await Promise.all([
          conversationState(deps.db, tenantId, contact, now),
          threadPage(deps.db, tenantId, contact.id, undefined),
        ]);
        const region = threadRegion(contact, state, thread, now);
        if (ctx.query.v === region.version) return notModified();
        // The window opened or closed since the page was drawn: the reply box changes with it. Between
        // free text and templates only the free-text part is replaced, so a template being filled in
        // (its values, the focus) stays; a reply that became possible or impossible replaces it all.
        let reply: Html | "" = "";
        const drawn = ctx.query.mode;
        if (drawn !== undefined && drawn !== state.mode) {
          const flip = (mode: string) => mode === "text" || mode === "template";
          if (flip(drawn) && flip(state.mode)) {
            const view = replyView(ctx, contact, state, [], now);
            reply = renderReplyText(view, emptyReplyValues(), { oob: true });
          } else {
            const templates = await replyTemplates(tenantId, state);
            reply = renderReply(replyView(ctx, contact, state, templates, now), emptyReplyValues(), {
              oob: true,
            });
          }
        }
        const last = idParam(ctx.query.last, "msg");
        return htmlResponse(html`${region.html}${threadUpdates(contact, state, thread, now, last)}${reply}`);
      }),
    )

    .post(
      "/conversations/:contactId/messages",
      signedIn(deps, async (ctx) => {
        const tenantId = ctx.session.tenantId;
        const contact = await requireConversationContact(deps.db, tenantId, ctx.params.contactId ?? "");
        const state = await conversationState(deps.db, tenantId, contact, deps.clock.now());
        const values = readReplyForm(ctx.form);
        // A template reply reads the sender's templates (to find the chosen one).
        const templates =
          values.kind === "template" && state.sender
            ? await listApprovedTemplates(deps.db, tenantId, state.sender.id)
            : [];

        let refusal: ApiError | undefined;
        try {
          if (!state.sender) {
            throw new ApiError(
              "messaging_window_closed",
              "This account has no active number to reply from.",
              {
                param: "sender",
              },
            );
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
        await markConversationRead(deps.db, tenantId, contact.id, now);
        const [after, thread] = await Promise.all([
          conversationState(deps.db, tenantId, fresh, now),
          threadPage(deps.db, tenantId, contact.id, undefined),
        ]);
        // The form lists templates in any window state (a template reply read them already).
        const afterTemplates =
          values.kind === "template" && after.sender && after.sender.id === state.sender?.id
            ? templates
            : await replyTemplates(tenantId, after);
        // A refused send keeps what was typed (and its key: a refusal does not use a key up).
        const shown: ReplyValues = !refusal
          ? emptyReplyValues()
          : refusal.code === "idempotency_key_reused"
            ? // This form was sent before with other content: a new key for the new message.
              {
                ...values,
                idempotencyKey: emptyReplyValues().idempotencyKey,
                error: {
                  message:
                    "This form was already used to send a message (see the conversation). Check it, then send again.",
                  param: null,
                },
              }
            : { ...values, error: { message: refusalMessage(refusal, fresh), param: refusal.param } };

        if (!ctx.htmx) {
          return htmlResponse(
            await conversationPage(ctx, {
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
        const region = threadRegion(fresh, after, thread, now, true);
        return htmlResponse(
          html`${renderReply(replyView(ctx, fresh, after, afterTemplates, now), shown, {
            autofocus: refusal ? undefined : values.kind,
          })}${region.html}${renderWindowState(after, now, true)}`,
          { headers: refusal ? { "x-panel-refusal": refusal.code } : {} },
        );
      }),
    );
}
