import type { ProviderError } from "../channel/provider.ts";
import type { ContactRow } from "../contacts/repository.ts";
import type { Db } from "../db/connect.ts";
import type { TemplateRow } from "../templates/repository.ts";
import type { ConversationState, ListNarrowing, NewConversationView } from "./conversation-data.ts";
import { listRegion, renderSidebar } from "./conversation-list.ts";
import { listPath, listTitle, renderListToolbar } from "./conversation-list-view.ts";
import {
  CONVERSATIONS_PATH,
  contactHandle,
  contactLabel,
  conversationPath,
  localTime,
} from "./conversation-markup.ts";
import { renderMessageDetailsBody } from "./conversation-message-view.ts";
import type { MessageDetails, ThreadPage } from "./conversation-messages.ts";
import {
  NEW_CONVERSATION_PATH,
  type ReplyFocus,
  type ReplyValues,
  type ReplyView,
  renderNewConversation,
  renderReply,
} from "./conversation-reply.ts";
import { renderThreadRegion } from "./conversation-thread-view.ts";
import { announce, announcer, renderWindowState } from "./conversation-views.ts";
import { type Html, html } from "./html.ts";
import { errorPage, page } from "./layout.ts";
import type { PanelContext } from "./web.ts";

/**
 * The Conversations section's pages, and the fragments that their polls and htmx sends answer with,
 * drawn from what the routes (conversations.ts) and the form actions (conversation-actions.ts) read.
 */

function conversationsPage(ctx: PanelContext, title: string, body: Html): Html {
  return page({ title, section: "conversations", session: ctx.session, csrf: ctx.csrf, body });
}

/** The list page: newest first, narrowed by the toolbar, updated by the region's poll. */
export function listPage(ctx: PanelContext, unread: number, narrowing: ListNarrowing, region: Html): Html {
  return conversationsPage(
    ctx,
    listTitle(unread),
    html`<div class="page-head">
<div class="page-head-row">
<h1>Conversations</h1>
<a id="new-conversation-link" class="button primary" href="${NEW_CONVERSATION_PATH}">New conversation</a>
</div>
<p class="muted">Newest first. New messages appear here without reloading.</p>
</div>
${renderListToolbar(narrowing)}
${announcer("conversations-announce")}
${region}`,
  );
}

/** A list poll's answer when the list changed: the tab title (or ""), the region, news of unread messages. */
export function listUpdate(
  title: Html | "",
  region: { html: Html; unread: number },
  unreadBefore: number,
): Html {
  const news =
    region.unread > unreadBefore
      ? announce(
          "conversations-announce",
          `New messages: ${region.unread} unread message${region.unread === 1 ? "" : "s"}`,
        )
      : "";
  return html`${title}${region.html}${news}`;
}

export function newConversationPage(ctx: PanelContext, view: NewConversationView, values: ReplyValues): Html {
  return conversationsPage(
    ctx,
    "New conversation · Conversations",
    html`<p class="conversation-back"><a href="${CONVERSATIONS_PATH}"><span aria-hidden="true">←</span> All conversations</a></p>
<div class="page-head">
<h1>New conversation</h1>
<p class="muted">Write first to a customer: a conversation starts with an approved template (free text only once they answer).</p>
</div>
${renderNewConversation(view, values)}`,
  );
}

export function replyView(
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

/** The latest page of the thread region, polling; `oob` when an htmx answer carries it besides. */
export function threadRegion(
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

/** What a conversation is drawn from: its contact, reply state, thread and the reply box's templates and values. */
interface DrawnConversation {
  contact: ContactRow;
  state: ConversationState;
  templates: TemplateRow[];
  thread: ThreadPage;
  values: ReplyValues;
  now: Date;
}

/** A conversation: the list beside it (narrowed as its sidebar's toolbar says), its thread, the reply box. */
export async function conversationPage(
  db: Db,
  ctx: PanelContext,
  input: DrawnConversation & {
    before?: string;
    /** The sidebar's filter and search. */
    narrowing?: ListNarrowing;
  },
): Promise<Html> {
  const { contact, state, thread, now } = input;
  const narrowing = input.narrowing ?? {};
  const name = contactLabel(contact);
  const sidebar = await listRegion(db, ctx.session.tenantId, now, { current: contact.id, narrowing });
  const region =
    input.before === undefined
      ? threadRegion(contact, state, thread, now)
      : renderThreadRegion({ contactId: contact.id, contactName: name, thread, now, before: input.before });
  return conversationsPage(
    ctx,
    `${name} · Conversations`,
    html`<div class="conversation-layout">
<a class="skip-link" href="#conversation">Skip to the conversation</a>
${renderSidebar(contact.id, narrowing, sidebar.html)}
<div class="conversation-main" id="conversation">
<p class="conversation-back"><a href="${listPath(narrowing)}"><span aria-hidden="true">←</span> All conversations</a></p>
<header class="conversation-head">
<h1>${name}</h1>
<p class="conversation-contact">${contact.name?.trim() && contactHandle(contact) ? html`<span class="mono">${contactHandle(contact)}</span> · ` : ""}WhatsApp</p>
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
  );
}

/** What a thread poll or an htmx send brings besides the thread: window line, announcements. */
export function threadUpdates(
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
    fresh > 0 ? announce("thread-announce", `${fresh} new message${fresh === 1 ? "" : "s"} from ${name}`) : ""
  }`;
}

/** An htmx send's answer: the reply box (emptied, or as typed with the refusal), the thread, the window line. */
export function replyUpdate(
  ctx: PanelContext,
  input: DrawnConversation & { autofocus: ReplyFocus | undefined },
): Html {
  const { contact, state, thread, now } = input;
  const region = threadRegion(contact, state, thread, now, true);
  return html`${renderReply(replyView(ctx, contact, state, input.templates, now), input.values, {
    autofocus: input.autofocus,
  })}${region.html}${renderWindowState(state, now, true)}`;
}

/** A message's details as a page of its own (without a script): its parts, then the status timeline. */
export function messagePage(
  ctx: PanelContext,
  contact: ContactRow,
  details: MessageDetails,
  timeline: Html,
): Html {
  const { message } = details;
  const name = contactLabel(contact);
  return conversationsPage(
    ctx,
    `Message ${message.id} · ${name} · Conversations`,
    html`<p class="conversation-back"><a href="${conversationPath(contact.id)}#message-${message.id}"><span aria-hidden="true">←</span> Conversation with ${name}</a></p>
<div class="page-head">
<h1>Message details</h1>
<p class="muted">${message.direction === "outbound" ? `To ${name}` : `From ${name}`} · ${localTime(message.created_at)}</p>
</div>
<section class="card message-page" aria-labelledby="message-details-title">
<h2 id="message-details-title" class="visually-hidden">Details</h2>
${renderMessageDetailsBody(details, contact.id, name)}
${timeline}
</section>`,
  );
}

/** A received picture or file that the provider did not hand over: why, and what to do. */
export function mediaUnavailablePage(
  mediaType: string | null,
  error: ProviderError,
  requestId: string | undefined,
): Html {
  const what = mediaType === "image" ? "picture" : "file";
  return errorPage(
    502,
    `The ${what} could not be fetched`,
    `WhatsApp did not hand over this ${what} (${error.message}). ${
      error.retryable
        ? "WhatsApp may be briefly unavailable: try again in a moment."
        : "WhatsApp keeps received media for a limited time, so it may have expired; ask the customer to send it again."
    }`,
    requestId,
  );
}
