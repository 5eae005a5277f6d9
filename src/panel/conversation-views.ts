import { createHash } from "node:crypto";
import { failureDocAnchor } from "../channel/failure-codes.ts";
import { type MessagingState, messagingState } from "../contacts/messaging-state.ts";
import type { ConversationRow } from "../conversations/repository.ts";
import { type HistoryMessageRow, presentMessageFields, presentRetrying } from "../history/presenter.ts";
import { API_PREFIX } from "../http/paths.ts";
import type {
  ConversationListPage,
  ListFilter,
  ListNarrowing,
  MessageDetails,
  ThreadMessageRow,
  ThreadPage,
} from "./conversation-data.ts";
import { type Html, html } from "./html.ts";
import { mediaIcon } from "./icons.ts";
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
/** Where /v2/docs documents each failure code (its anchor: `failure-<code>`). */
export const FAILURE_DOCS_PATH = `${API_PREFIX}/docs`;
/** The suffix the layout gives every page title (src/panel/layout.ts `head`). */
const TITLE_SUFFIX = " · Messaging panel";

export function conversationPath(contactId: string): string {
  return `${CONVERSATIONS_PATH}/${encodeURIComponent(contactId)}`;
}

/** A short, stable digest of rendered markup: the poll's "has anything changed?" token. */
export function versionOf(...parts: (Html | string)[]): string {
  const hash = createHash("sha256");
  for (const part of parts) hash.update(typeof part === "string" ? part : part.value).update("\0");
  return hash.digest("base64url").slice(0, 16);
}

export function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) search.set(key, String(value));
  const text = search.toString();
  return text ? `?${text}` : "";
}

export function contactLabel(contact: { name: string | null; phone: string | null }): string {
  return contact.name?.trim() || contact.phone || "Unknown contact";
}

/** "2026-11-26 01:40" (UTC, to the minute). */
function utcText(date: Date): string {
  return date.toISOString().replace("T", " ").slice(0, 16);
}

/**
 * An exact time: UTC as the server writes it, shown in the browser's own time zone by panel.js
 * (`time.local-time`, on load and after every htmx swap); UTC stays in the tooltip.
 */
export function localTime(date: Date): Html {
  return html`<time class="local-time" datetime="${date.toISOString()}" title="${utcText(date)} UTC">${utcText(date)} UTC</time>`;
}

/** What a failure code means, on /v2/docs. */
export function failureDocLink(code: string): Html {
  return html`<a class="failure-doc" href="${FAILURE_DOCS_PATH}#${failureDocAnchor(encodeURIComponent(code))}">What <code>${code}</code> means</a>`;
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

/** "[icon] document: invoice.pdf": what a send's media, or any media in the list, shows. */
function mediaPlaceholder(media: { type: string; filename: string | null }): Html {
  return html`${mediaIcon(media.type)} ${media.type}${media.filename ? html`: ${media.filename}` : ""}`;
}

/**
 * A received message's media, fetched from the provider when shown (issue 24): a picture as a
 * thumbnail linking to the full picture, anything else as a download link; the placeholder for a
 * message whose media the provider cannot be asked for (a send, or one received before media ids
 * were kept).
 */
function messageMedia(row: ThreadMessageRow, contactId: string, contactName: string): Html {
  const media = presentMessageFields(row).media;
  if (!media) return html``;
  if (row.direction !== "inbound" || !row.has_media || !row.id) {
    return html`<p class="message-media">${mediaPlaceholder(media)}</p>`;
  }
  const path = mediaPath(contactId, row.id);
  if (media.type === "image") {
    return html`<p class="message-media message-image"><a href="${path}"><img src="${path}" loading="lazy" alt="Image from ${contactName}"></a></p>`;
  }
  const label = media.filename ?? `the ${media.type}`;
  return html`<p class="message-media"><a class="message-download" href="${path}" download>${mediaIcon(media.type)} Download ${label}</a></p>`;
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
  /** The filter and search the list is narrowed to (kept by its poll, its paging and its rows' links). */
  narrowing?: ListNarrowing;
  /** The current conversation, listed although the narrowing leaves it out (src/panel/conversation-list.ts). */
  pinned?: string;
}

const FILTER_LABELS: Record<ListFilter, string> = {
  unread: "Unread",
  open: "Window open",
  failed: "Failed",
};

/** A page's URL with a filter and search: the list page's, or a conversation's (its sidebar's). */
export function narrowedPath(base: string, narrowing: ListNarrowing, before?: number): string {
  return `${base}${query({ filter: narrowing.filter, q: narrowing.q, before })}`;
}

/** The list page's URL for a filter and search (and an older page). */
export function listPath(narrowing: ListNarrowing, before?: number): string {
  return narrowedPath(CONVERSATIONS_PATH, narrowing, before);
}

/**
 * Filters (links: each is a plain URL, so they work without a script, can be bookmarked, and the
 * list's poll keeps them) and the search by name or phone (a GET form that keeps the filter). `base`
 * is the page they narrow: the list page, or a conversation (whose sidebar they narrow).
 */
export function renderListToolbar(narrowing: ListNarrowing, base: string = CONVERSATIONS_PATH): Html {
  const choices: { filter: ListFilter | undefined; label: string }[] = [
    { filter: undefined, label: "All" },
    ...(Object.keys(FILTER_LABELS) as ListFilter[]).map((filter) => ({
      filter,
      label: FILTER_LABELS[filter],
    })),
  ];
  return html`<div class="list-toolbar">
<nav class="list-filters" aria-label="Filter conversations">
<ul>
${choices.map(
  (choice) =>
    html`<li><a id="filter-${choice.filter ?? "all"}" href="${narrowedPath(base, { filter: choice.filter, q: narrowing.q })}"${choice.filter === narrowing.filter ? html` aria-current="page"` : ""}>${choice.label}</a></li>`,
)}
</ul>
</nav>
<form class="list-search" role="search" method="get" action="${base}">
${narrowing.filter ? html`<input type="hidden" name="filter" value="${narrowing.filter}">` : ""}
<label for="conversation-search" class="visually-hidden">Search by name or phone number</label>
<input type="search" id="conversation-search" name="q" value="${narrowing.q ?? ""}" placeholder="Name or phone number" maxlength="100" autocomplete="off" aria-describedby="conversation-search-hint">
<button type="submit" id="conversation-search-submit" class="button">Search</button>
<p class="hint visually-hidden" id="conversation-search-hint">A name, or part of a phone number such as 0151 or +49 151</p>
</form>
</div>`;
}

/** "Unread and matching “ana”": what the list shows, for its heading and its empty state. */
function narrowingText(narrowing: ListNarrowing): string {
  const parts: string[] = [];
  if (narrowing.filter) parts.push(FILTER_LABELS[narrowing.filter].toLowerCase());
  if (narrowing.q !== undefined) parts.push(`matching “${narrowing.q}”`);
  return parts.join(", ");
}

/** The tab title of the list page: the unread count first, so it shows in a narrow tab. */
export function listTitle(unread: number): string {
  return unread > 0 ? `(${unread > 999 ? "999+" : unread}) Conversations` : "Conversations";
}

/** A poll's new tab title: htmx takes a root-level <title> of a fragment as the document's title. */
export function titleUpdate(unread: number): Html {
  return html`<title>${listTitle(unread)}${TITLE_SUFFIX}</title>`;
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
  const pinned = row.contact_id === input.pinned;
  const unread = isCurrent ? 0 : row.unread;
  const label = contactLabel({ name: row.contact_name, phone: row.contact_phone });
  const failed = row.direction === "outbound" && row.status === "failed";
  // A row keeps the narrowing: the conversation it opens has its sidebar narrowed alike.
  const href = narrowedPath(conversationPath(row.contact_id), input.narrowing ?? {});
  return html`<li class="conversation${unread > 0 ? " is-unread" : ""}${failed ? " is-failed" : ""}${pinned ? " is-pinned" : ""}">
<a class="conversation-link" id="conversation-${row.contact_id}" href="${href}"${isCurrent ? html` aria-current="page"` : ""}>
<span class="conversation-name">${label}</span>
<span class="conversation-time">${timeTag(row.last_message_at, input.now)}</span>
<span class="conversation-phone">${row.contact_name?.trim() ? row.contact_phone : ""}</span>
<span class="conversation-unread">${unread > 0 ? html`<span class="badge count unread-badge">${unread}<span class="visually-hidden"> unread message${unread === 1 ? "" : "s"}</span></span>` : ""}</span>
<span class="conversation-preview">${lastMessageLine(row)}</span>
<span class="conversation-window">${windowBadge(messaging, input.now)}${failed ? html` <span class="badge bad failed-marker"><span aria-hidden="true">!</span> Failed<span class="visually-hidden">: the last message was not delivered</span></span>` : ""}${pinned ? html` <span class="pinned-note">shown because it is open</span>` : ""}</span>
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
  const narrowing = input.narrowing ?? {};
  const narrowed = narrowing.filter !== undefined || narrowing.q !== undefined;
  const empty =
    page.conversations.length === 0
      ? narrowed
        ? html`<div class="empty-state">
<h2>No conversations ${narrowingText(narrowing)}</h2>
<p><a id="conversations-all" href="${CONVERSATIONS_PATH}">Show all conversations</a></p>
</div>`
        : input.before === undefined
          ? html`<div class="empty-state">
<h2>No conversations yet</h2>
<p>When a customer writes to one of your numbers, their message appears here within seconds, without reloading the page. Messages you send through the API start a conversation too.</p>
</div>`
          : html`<p class="empty-state">No older conversations.</p>`
      : "";
  const inner = html`${empty}${
    page.conversations.length > 0
      ? html`<ul class="conversations" aria-label="Conversations${narrowed ? `, ${narrowingText(narrowing)}` : ""}, newest first">
${page.conversations.map((row) => listRow(row, input))}
</ul>`
      : ""
  }${
    page.olderBefore !== undefined || input.before !== undefined
      ? html`<nav class="list-paging" aria-label="More conversations">
${input.before !== undefined ? html`<a id="conversations-newest" class="button subtle" href="${listPath(narrowing)}">Newest</a>` : ""}
${page.olderBefore !== undefined ? html`<a id="conversations-older" class="button subtle" href="${listPath(narrowing, page.olderBefore)}">Older conversations</a>` : ""}
</nav>`
      : ""
  }`;
  const version = versionOf(inner);
  const poll = input.poll
    ? html` hx-get="${LIST_FRAGMENT_PATH}${query({ v: version, u: unread, current: input.current, filter: narrowing.filter, q: narrowing.q })}" hx-trigger="${POLL_TRIGGER}" hx-swap="outerHTML"`
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

/**
 * A message waiting for a retry (sql/020): still `accepted`, with the error of its last attempt.
 * The send record clears `last_error` once the message is sent or fails for good.
 */
export function isRetrying(row: ThreadMessageRow): boolean {
  return presentRetrying(row) !== null;
}

/** "Retrying: 2 attempts so far, next at 14:05. Last error: … What provider_rate_limited means". */
function retryingLine(row: ThreadMessageRow, now: Date): Html {
  const error = row.last_error!;
  const attempts = row.send_attempts;
  const next = row.send_not_before;
  return html`<p class="message-retrying"><strong>Retrying:</strong> ${attempts} attempt${attempts === 1 ? "" : "s"} so far, next ${
    next && next.getTime() > now.getTime() ? html`at ${localTime(next)}` : "due now"
  }. Last error: ${error.message} ${failureDocLink(error.code)}</p>`;
}

function messageFacts(row: ThreadMessageRow): Html {
  const id = row.id!;
  return html`<dl class="message-facts">
<div><dt>Id</dt><dd><code id="id-${id}">${id}</code> <button type="button" class="button subtle copy" id="copy-${id}" data-copy="#id-${id}">Copy id</button></dd></div>
${row.template_name ? html`<div><dt>Template</dt><dd>${row.template_name} <span class="muted">(${row.template_language ?? "?"})</span></dd></div>` : ""}
${row.client_reference ? html`<div><dt>Your reference</dt><dd><code>${row.client_reference}</code></dd></div>` : ""}
</dl>`;
}

/**
 * A message's details, closed by default: its id (with a copy button), its template, and the
 * status timeline, which is read when the details are first opened (an event-log lookup per
 * message, not per poll). Without a script the link opens the same details as a page.
 */
function messageDetailsDisclosure(row: ThreadMessageRow, contactId: string): Html {
  const id = row.id!;
  const path = messagePath(contactId, id);
  return html`<details class="message-details" id="details-${id}" hx-get="${path}" hx-trigger="toggle once" hx-target="find .message-timeline" hx-swap="outerHTML">
<summary id="summary-${id}">Details<span class="visually-hidden"> of this message</span></summary>
${messageFacts(row)}
<div class="message-timeline"><p class="hint"><a href="${path}">Status times</a></p></div>
</details>`;
}

export function messagePath(contactId: string, messageId: string): string {
  return `${conversationPath(contactId)}/messages/${encodeURIComponent(messageId)}`;
}

/** A received message's media, from the provider (src/panel/inbound-media.ts). */
export function mediaPath(contactId: string, messageId: string): string {
  return `${messagePath(contactId, messageId)}/media`;
}

function messageItem(row: ThreadMessageRow, contactId: string, contactName: string, now: Date): Html {
  const message = presentMessageFields(row);
  const outbound = message.direction === "outbound";
  const failed = message.status === "failed";
  const retrying = isRetrying(row);
  const text = message.text ?? (message.media ? null : message.preview);
  return html`<li class="message ${outbound ? "outbound" : "inbound"}${failed ? " failed" : ""}${retrying ? " retrying" : ""}"${message.id ? html` id="message-${message.id}"` : ""} data-type="${message.type}">
<div class="bubble">
<span class="visually-hidden">${outbound ? "You sent" : `${contactName} wrote`}${message.type === "template" ? " a template" : ""}:</span>
${message.type === "template" ? html`<span class="message-kind" aria-hidden="true">Template${row.template_name ? html` · ${row.template_name}` : ""}</span>` : ""}
${messageMedia(row, contactId, contactName)}
${text ? html`<p class="message-text">${text}</p>` : ""}
</div>
<p class="message-meta">${localTime(row.created_at)}${
    retrying
      ? html` <span class="badge message-status warn" data-status="retrying"><span class="visually-hidden">Status: </span>Retrying</span>`
      : message.status
        ? html` ${statusBadge(message.status)}`
        : ""
  }</p>
${
  failed && message.failure
    ? html`<p class="message-failure"><strong>Not delivered:</strong> ${message.failure.message} ${failureDocLink(message.failure.code)}</p>`
    : ""
}
${retrying ? retryingLine(row, now) : ""}
${message.id ? messageDetailsDisclosure(row, contactId) : ""}
</li>`;
}

/** The message page's head of details (the timeline follows it): text, id, template, failure. */
export function renderMessageDetailsBody(
  details: MessageDetails,
  contactId: string,
  contactName: string,
): Html {
  const row = details.message;
  const message = presentMessageFields(row);
  const text = message.text ?? (message.media ? null : message.preview);
  return html`${messageMedia(row, contactId, contactName)}
${text ? html`<blockquote class="message-quote"><p class="message-text">${text}</p></blockquote>` : ""}
${row.id ? messageFacts(row) : ""}
${
  message.status === "failed" && message.failure
    ? html`<p class="message-failure"><strong>Not delivered:</strong> ${message.failure.message} ${failureDocLink(message.failure.code)}</p>`
    : ""
}`;
}

const STEP_LABELS: Record<string, string> = {
  scheduled: "Scheduled",
  accepted: "Accepted",
  sent: "Sent",
  delivered: "Delivered",
  read: "Read",
  failed: "Failed",
  canceled: "Canceled",
};

/**
 * The status timeline (`.message-timeline`): what the details disclosure loads, and the message page
 * shows. Acceptance is the message's own time; the later statuses are the event log's records.
 */
export function renderMessageTimeline(details: MessageDetails, now: Date): Html {
  const { message, steps } = details;
  if (message.direction === "inbound") {
    return html`<div class="message-timeline">
<ol class="timeline"><li><span class="step">Received</span> ${localTime(message.created_at)}</li></ol>
</div>`;
  }
  const items: Html[] = [html`<li><span class="step">Accepted</span> ${localTime(message.created_at)}</li>`];
  if (message.send_at) {
    items.push(html`<li><span class="step">Scheduled for</span> ${localTime(message.send_at)}</li>`);
  }
  for (const step of steps) {
    items.push(
      html`<li${step.status === "failed" ? html` class="failed"` : ""}><span class="step">${STEP_LABELS[step.status] ?? step.status}</span> ${localTime(step.at)}${
        step.failure
          ? html` <span class="step-failure">${step.failure.message} ${failureDocLink(step.failure.code)}</span>`
          : ""
      }</li>`,
    );
  }
  const status = message.status ?? "accepted";
  const recorded = steps.some((step) => step.status === status);
  if (!recorded && status !== "accepted" && status !== "scheduled") {
    // The event log keeps 30 days: older statuses are known only by the message's last change.
    items.push(
      html`<li><span class="step">${STEP_LABELS[status] ?? status}</span> ${localTime(message.updated_at)} <span class="muted">(the message's last change; earlier status times are no longer kept)</span></li>`,
    );
  }
  if (isRetrying(message)) {
    items.push(html`<li class="retrying">${retryingLine(message, now)}</li>`);
  }
  return html`<div class="message-timeline">
<ol class="timeline" aria-label="Status timeline">${items}</ol>
<p class="hint">Times are when this service recorded each status, in your time zone (hover over one for UTC).</p>
</div>`;
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
${rows.length === 0 ? html`<li class="thread-empty muted">No messages yet.</li>` : ""}${rows.map((row) => messageItem(row, input.contactId, input.contactName, input.now))}
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
<span>${timeTag(optedOutAt, now)} <span class="muted">(${localTime(optedOutAt)}) · nothing is sent to this customer until they write START</span></span>
</p>`;
  }
  const open = messaging.within_window;
  const expires = messaging.window_expires_at;
  return html`<p id="window-state" class="window-state ${open ? "open" : "closed"}"${oobAttribute}>
<span class="badge ${open ? "ok" : "warn"}">${open ? "Window open" : "Window closed"}</span>
${
  open && expires
    ? html`<span>closes in ${durationText(secondsLeft(expires, now))} <span class="muted">(at ${localTime(new Date(expires))})</span></span>`
    : html`<span class="muted">only approved templates can be sent until the customer writes again</span>`
}
</p>`;
}
