import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { type DownloadedMedia, ProviderError } from "../channel/provider.ts";
import { requestState } from "../http/request-state.ts";
import type { OutboundSending } from "../messages/admission.ts";
import { senderCredentials } from "../senders/repository.ts";
import { conversationActions } from "./conversation-actions.ts";
import {
  conversationState,
  newConversationView,
  openConversation,
  pathConversationContact,
  replyTemplates,
  senderTemplates,
  tenantUnread,
} from "./conversation-data.ts";
import { listRegion } from "./conversation-list.ts";
import { titleUpdate } from "./conversation-list-view.ts";
import { conversationPath } from "./conversation-markup.ts";
import { inboundMediaSource, messageDetails } from "./conversation-messages.ts";
import {
  conversationPage,
  listPage,
  listUpdate,
  mediaUnavailablePage,
  messagePage,
  newConversationPage,
  replyView,
  threadRegion,
  threadUpdates,
} from "./conversation-pages.ts";
import { beforeSeconds, idParam, narrowingOf } from "./conversation-params.ts";
import { emptyReplyValues, renderReply, renderReplyText } from "./conversation-reply.ts";
import { renderMessageTimeline } from "./conversation-status-view.ts";
import { type Html, html } from "./html.ts";
import { mediaResponse } from "./inbound-media.ts";
import { PANEL_PREFIX } from "./paths.ts";
import { renderTemplateFields } from "./template-form.ts";
import { htmlResponse, redirect, signedIn } from "./web.ts";

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

function notModified(): Response {
  return new Response(null, { status: 204, headers: { "cache-control": "no-store" } });
}

export function conversationPages(deps: AppDeps, sending: OutboundSending) {
  const actions = conversationActions(deps, sending);

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
        return htmlResponse(listPage(ctx, unread, narrowing, region.html));
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
        return htmlResponse(listUpdate(title, region, before));
      }),
    )

    .get(
      "/conversations/new",
      signedIn(deps, async (ctx) => {
        const view = await newConversationView(
          deps.db,
          ctx.session.tenantId,
          ctx.csrf,
          idParam(ctx.query.sender, "snd"),
        );
        const values = emptyReplyValues(idParam(ctx.query.template, "tpl") ?? "");
        if (ctx.htmx && ctx.request.headers.get("hx-target") === "template-fields") {
          return htmlResponse(renderTemplateFields(view.templates, values));
        }
        return htmlResponse(newConversationPage(ctx, view, { ...values, kind: "template" }));
      }),
    )

    .post("/conversations/new", signedIn(deps, actions.startConversation))

    .get(
      "/conversations/:contactId/messages/:messageId",
      signedIn(deps, async (ctx) => {
        const tenantId = ctx.session.tenantId;
        const contact = await pathConversationContact(ctx);
        const details = await messageDetails(deps.db, tenantId, contact.id, ctx.params.messageId ?? "");
        const now = deps.clock.now();
        const timeline = renderMessageTimeline(details, now);
        if (ctx.htmx) return htmlResponse(timeline);
        return htmlResponse(messagePage(ctx, contact, details, timeline));
      }),
    )

    .get(
      "/conversations/:contactId/messages/:messageId/media",
      signedIn(deps, async (ctx) => {
        const tenantId = ctx.session.tenantId;
        const contact = await pathConversationContact(ctx);
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
          return htmlResponse(mediaUnavailablePage(source.mediaType, error, requestId), {
            status: 502,
            headers: requestId ? { "request-id": requestId } : {},
          });
        }
        return mediaResponse(source, media);
      }),
    )

    .get(
      "/conversations/:contactId",
      signedIn(deps, async (ctx) => {
        const tenantId = ctx.session.tenantId;
        const contact = await pathConversationContact(ctx);
        // A merged contact's old address (DESIGN §14): the survivor's conversation, where its messages are.
        if (contact.id !== ctx.params.contactId) {
          return redirect(`${conversationPath(contact.id)}${new URL(ctx.request.url).search}`, ctx.htmx);
        }
        const now = deps.clock.now();
        const templateId = idParam(ctx.query.template, "tpl") ?? "";
        if (ctx.htmx && ctx.request.headers.get("hx-target") === "template-fields") {
          // The template picker changed: only its variables fieldset.
          const state = await conversationState(deps.db, tenantId, contact, now);
          const templates = await senderTemplates(deps.db, tenantId, state.sender);
          return htmlResponse(renderTemplateFields(templates, emptyReplyValues(templateId)));
        }
        const before = ctx.query.before || undefined;
        const { state, thread } = await openConversation(deps.db, tenantId, contact, now, before);
        const templates = await replyTemplates(deps.db, tenantId, state);
        return htmlResponse(
          await conversationPage(deps.db, ctx, {
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
        const contact = await pathConversationContact(ctx);
        const now = deps.clock.now();
        // Watching the conversation keeps it read: what arrives while it is open is seen.
        const { state, thread } = await openConversation(deps.db, tenantId, contact, now, undefined);
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
            const templates = await replyTemplates(deps.db, tenantId, state);
            reply = renderReply(replyView(ctx, contact, state, templates, now), emptyReplyValues(), {
              oob: true,
            });
          }
        }
        const last = idParam(ctx.query.last, "msg");
        return htmlResponse(html`${region.html}${threadUpdates(contact, state, thread, now, last)}${reply}`);
      }),
    )

    .post("/conversations/:contactId/messages", signedIn(deps, actions.reply));
}
