import { createHash } from "node:crypto";
import { type MessagingState, messagingState } from "../contacts/messaging-state.ts";
import type { ConversationRow } from "../conversations/repository.ts";
import { type HistoryMessageRow, presentMessageFields } from "../history/presenter.ts";
import type { ConversationListPage, ThreadPage } from "./conversation-data.ts";
import { type Html, html } from "./html.ts";
import { durationText, timeTag } from "./layout.ts";
import { PANEL_PREFIX } from "./paths.ts";

/**
 * Markup of the Conversations section: the list region, the thread region and the window state.
 * The two regions poll their own fragment URL with htmx every few seconds, passing the version (a
 * hash of what they show); the server answers 204 while nothing changed, so htmx leaves the page
 * alone. Polled markup never carries `autofocus`: an update must not move the user's focus.
 */

export const CONVERSATIONS_PATH = `${PANEL_PREFIX}/conversations`;
export const LIST_FRAGMENT_PATH = `${CONVERSATIONS_PATH}/list`;
export const POLL_TRIGGER = "every 3s";

export function conversationPath(contactId: string): string {
  return `${CONVERSATIONS_PATH}/${encodeURIComponent(contactId)}`;
}

/** A short, stable digest of rendered markup: the poll's "has anything changed?" token. */
export function versionOf(...parts: (Html | string)[]): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(typeof part === "string" ? part : part.value).update("\0");
  return hash.digest("base64url").slice(0, 16);
}

function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : "";
}

export function contactLabel(contact: { name: string | null; phone: string | null }): string {
  return contact.name?.trim() || contact.phone || "Unknown contact";
}

/** Seconds until the window closes (`window_expires_at`), never negative. */
function secondsLeft(expires: string, now: Date): number {
  return Math.max(0, (Date.parse(expires) - now.getTime()) / 1000);
}

/** "open · closes in 5 h 12 min" or "closed" (SPEC §3: 24 h from the customer's last message). */
export function windowText(messaging: MessagingState, now: Date): string {
  if (!messaging.within_window || !messaging.window_expires_at) return "closed";
  return `open · closes in ${durationText(secondsLeft(messaging.window_expires_at, now))}`;
}

function windowBadge(messaging: MessagingState, now: Date): Html {
  if (messaging.opted_out) {
    return html`<span class="window opted-out"><span class="visually-hidden">Reply window: </span>opted out</span>`;
  }
  const open = messaging.within_window;
  return html`<span class="window ${open ? "open" : "closed"}"><span class="visually-hidden">Reply window: </span>${windowText(messaging, now)}</span>`;
}

const MEDIA_ICONS: Record<string, string> = {
  image: "🖼️",
  video: "🎬",
  document: "📄",
  audio: "🎵",
};

/** "📄 document: invoice.pdf": a placeholder, never the content (the service does not serve media). */
function mediaPlaceholder(media: { type: string; filename: string | null }): Html {
  return html`<span aria-hidden="true">${MEDIA_ICONS[media.type] ?? "📎"}</span> ${media.type}${media.filename ? html`: ${media.filename}` : ""}`;
}

const PREVIEW_CHARS = 140;

function shorten(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  const chars = [...flat];
  return chars.length > PREVIEW_CHARS ? `${chars.slice(0, PREVIEW_CHARS - 1).join("")}…` : flat;
}

/** One line for the list: direction, then the media placeholder and/or the text. */
function lastMessageLine(row: HistoryMessageRow): Html {
  const message = presentMessageFields(row);
  const direction =
    message.direction === "outbound"
      ? html`<span class="direction out"><span aria-hidden="true">↗</span> You:</span>`
      : html`<span class="direction in"><span aria-hidden="true">↙</span><span class="visually-hidden">They wrote:</span></span>`;
  const text = message.text ?? (message.media ? null : message.preview);
  return html`${direction} ${message.media ? html`${mediaPlaceholder(message.media)}${text ? " · " : ""}` : ""}${text ? shorten(text) : ""}`;
}

export interface ListRegionInput {
  page: ConversationListPage;
  now: Date;
  /** The first page polls for changes; older pages stay as they are. */
  poll: boolean;
  /** The conversation open beside the list (the sidebar of a conversation): marked, badge hidden. */
  current?: string;
  /** On older pages: the `before` they were asked with (shown as a link back to the newest). */
  before?: number;
}

function listRow(row: ConversationRow, input: ListRegionInput) {
  // The window and the opt-out (the badge shows no sendability): whether a sender is active does not matter.
  const messaging = messagingState(
    row.contact_last_inbound_at,
    input.now,
    true,
    row.contact_opted_out_at !== null,
  );
  const isCurrent = row.contact_id === input.current;
  const unread = isCurrent ? 0 : row.unread;
  const label = contactLabel({ name: row.contact_name, phone: row.contact_phone });
  return html`<li class="conversation${unread > 0 ? " is-unread" : ""}">
<a class="conversation-link" id="conversation-${row.contact_id}" href="${conversationPath(row.contact_id)}"${isCurrent ? html` aria-current="page"` : ""}>
<span class="conversation-name">${label}</span>
<span class="conversation-time">${timeTag(row.last_message_at, input.now)}</span>
<span class="conversation-phone">${row.contact_name?.trim() ? row.contact_phone : ""}</span>
<span class="conversation-unread">${unread > 0 ? html`<span class="badge count unread-badge">${unread}<span class="visually-hidden"> unread message${unread === 1 ? "" : "s"}</span></span>` : ""}</span>
<span class="conversation-preview">${lastMessageLine(row)}</span>
<span class="conversation-window">${windowBadge(messaging, input.now)}</span>
</a>
</li>`;
}

/** The list region (`#conversation-list`), whole, as the page embeds it and as the poll answers it. */
export function renderListRegion(input: ListRegionInput): { html: Html; version: string; unread: number } {
  const { page } = input;
  const unread = page.conversations.reduce(
    (sum, row) => sum + (row.contact_id === input.current ? 0 : row.unread),
    0,
  );
  const empty =
    page.conversations.length === 0
      ? input.before === undefined
        ? html`<div class="empty-state">
<h2>No conversations yet</h2>
<p>When a customer writes to one of your numbers, their message appears here within seconds, without reloading the page. Messages you send through the API start a conversation too.</p>
</div>`
        : html`<p class="empty-state">No older conversations.</p>`
      : "";
  const inner = html`${empty}${
    page.conversations.length > 0
      ? html`<ul class="conversations" aria-label="Conversations, newest first">
${page.conversations.map((row) => listRow(row, input))}
</ul>`
      : ""
  }${
    page.olderBefore !== undefined || input.before !== undefined
      ? html`<nav class="list-paging" aria-label="More conversations">
${input.before !== undefined ? html`<a id="conversations-newest" class="button subtle" href="${CONVERSATIONS_PATH}">Newest</a>` : ""}
${page.olderBefore !== undefined ? html`<a id="conversations-older" class="button subtle" href="${CONVERSATIONS_PATH}${query({ before: page.olderBefore })}">Older conversations</a>` : ""}
</nav>`
      : ""
  }`;
  const version = versionOf(inner);
  const poll = input.poll
    ? html` hx-get="${LIST_FRAGMENT_PATH}${query({ v: version, u: unread, current: input.current })}" hx-trigger="${POLL_TRIGGER}" hx-swap="outerHTML"`
    : "";
  return {
    html: html`<div id="conversation-list" class="conversation-list"${poll}>${inner}</div>`,
    version,
    unread,
  };
}

/** Polite announcements of what a poll brought (read by screen readers, invisible otherwise). */
export function announcer(id: string, text = ""): Html {
  return html`<p id="${id}" class="visually-hidden" role="status" aria-live="polite">${text}</p>`;
}

/** Out-of-band update of an announcer's text (its live region stays in place, so it is read). */
export function announce(id: string, text: string): Html {
  return html`<p id="${id}" hx-swap-oob="innerHTML">${text}</p>`;
}

const STATUS_LABELS: Record<string, { label: string; tone: string }> = {
  scheduled: { label: "Scheduled", tone: "" },
  canceled: { label: "Canceled", tone: "warn" },
  accepted: { label: "Accepted", tone: "" },
  sent: { label: "Sent", tone: "" },
  delivered: { label: "Delivered", tone: "ok" },
  read: { label: "Read", tone: "ok" },
  failed: { label: "Failed", tone: "bad" },
};

function statusBadge(status: string): Html {
  const known = STATUS_LABELS[status] ?? { label: status, tone: "warn" };
  return html`<span class="badge message-status ${known.tone}" data-status="${status}"><span class="visually-hidden">Status: </span>${known.label}</span>`;
}

function messageItem(row: HistoryMessageRow, contactName: string, now: Date): Html {
  const message = presentMessageFields(row);
  const outbound = message.direction === "outbound";
  const failed = message.status === "failed";
  const text = message.text ?? (message.media ? null : message.preview);
  return html`<li class="message ${outbound ? "outbound" : "inbound"}${failed ? " failed" : ""}"${message.id ? html` id="message-${message.id}"` : ""} data-type="${message.type}">
<div class="bubble">
<span class="visually-hidden">${outbound ? "You sent" : `${contactName} wrote`}${message.type === "template" ? " a template" : ""}:</span>
${message.type === "template" ? html`<span class="message-kind" aria-hidden="true">Template</span>` : ""}
${message.media ? html`<p class="message-media">${mediaPlaceholder(message.media)}</p>` : ""}
${text ? html`<p class="message-text">${text}</p>` : ""}
</div>
<p class="message-meta">${timeTag(row.created_at, now)}${message.status ? html` ${statusBadge(message.status)}` : ""}</p>
${
  failed && message.failure
    ? html`<p class="message-failure"><strong>Not delivered:</strong> ${message.failure.message} <code>${message.failure.code}</code></p>`
    : ""
}
</li>`;
}

export interface ThreadRegionInput {
  contactId: string;
  contactName: string;
  thread: ThreadPage;
  now: Date;
  /** Only the latest page polls (an earlier page is history that does not change). */
  poll?: { mode: string; windowState: Html };
  /** On an earlier page: the id it was asked for. */
  before?: string;
  /** Out of band: an htmx answer that targets something else (the reply box) also replaces this. */
  oob?: boolean;
}

/** The thread region (`#thread`): an "Earlier messages" link and the messages, oldest first. */
export function renderThreadRegion(input: ThreadRegionInput): { html: Html; version: string; last?: string } {
  const { rows, hasEarlier } = input.thread;
  const firstId = rows.find((row) => row.id !== null)?.id ?? undefined;
  const last = rows.findLast((row) => row.id !== null)?.id ?? undefined;
  const base = conversationPath(input.contactId);
  const inner = html`${
    hasEarlier && firstId
      ? html`<p class="thread-earlier"><a id="thread-earlier" href="${base}${query({ before: firstId })}">Earlier messages</a></p>`
      : ""
  }<ol class="thread" role="log" aria-label="Messages with ${input.contactName}, oldest first">
${rows.length === 0 ? html`<li class="thread-empty muted">No messages yet.</li>` : ""}${rows.map((row) => messageItem(row, input.contactName, input.now))}
</ol>${
    input.before !== undefined
      ? html`<p class="thread-latest"><a id="thread-latest" href="${base}">Latest messages</a></p>`
      : ""
  }`;
  // The window state and the reply mode are part of what a poll reports (they change by time too).
  const version = versionOf(inner, input.poll?.windowState ?? "", input.poll?.mode ?? "");
  const poll = input.poll
    ? html` hx-get="${base}/thread${query({ v: version, last, mode: input.poll.mode })}" hx-trigger="${POLL_TRIGGER}" hx-swap="outerHTML"`
    : "";
  const oob = input.oob ? html` hx-swap-oob="true"` : "";
  return { html: html`<div id="thread" class="thread-region"${poll}${oob}>${inner}</div>`, version, last };
}

/**
 * The conversation header's window line (`#window-state`): the opt-out first (with when), then the
 * window; `oob` for a poll's out-of-band update.
 */
export function renderWindowState(
  state: { messaging: MessagingState; contact: { opted_out_at: Date | null } },
  now: Date,
  oob = false,
): Html {
  const { messaging } = state;
  const oobAttribute = oob ? html` hx-swap-oob="true"` : "";
  const optedOutAt = state.contact.opted_out_at;
  if (messaging.opted_out && optedOutAt) {
    return html`<p id="window-state" class="window-state opted-out"${oobAttribute}>
<span class="badge bad">Opted out</span>
<span>${timeTag(optedOutAt, now)} <span class="muted">(${optedOutAt.toISOString().replace("T", " ").slice(0, 16)} UTC) · nothing is sent to this customer until they write START</span></span>
</p>`;
  }
  const open = messaging.within_window;
  const expires = messaging.window_expires_at;
  return html`<p id="window-state" class="window-state ${open ? "open" : "closed"}"${oobAttribute}>
<span class="badge ${open ? "ok" : "warn"}">${open ? "Window open" : "Window closed"}</span>
${
  open && expires
    ? html`<span>closes in ${durationText(secondsLeft(expires, now))} <span class="muted">(${expires.replace("T", " ").slice(0, 16)} UTC)</span></span>`
    : html`<span class="muted">only approved templates can be sent until the customer writes again</span>`
}
</p>`;
}
