import { type MessagingState, messagingState } from "../contacts/messaging-state.ts";
import type { ConversationRow } from "../conversations/repository.ts";
import { type HistoryMessageRow, presentMessageFields } from "../history/presenter.ts";
import type { ConversationListPage, ListFilter, ListNarrowing } from "./conversation-data.ts";
import {
  CONVERSATIONS_PATH,
  contactHandle,
  contactLabel,
  conversationPath,
  LIST_FRAGMENT_PATH,
  POLL_TRIGGER,
  query,
  versionOf,
  windowText,
} from "./conversation-markup.ts";
import { mediaPlaceholder } from "./conversation-message-view.ts";
import { statusBadge } from "./conversation-status-view.ts";
import { type Html, html } from "./html.ts";
import { timeTag } from "./layout.ts";

/** The list region (`#conversation-list`) and its toolbar of filters and search; the list page's tab title. */

/** The suffix the layout gives every page title (src/panel/layout.ts `head`). */
const TITLE_SUFFIX = " · Messaging panel";

function windowBadge(messaging: MessagingState, now: Date): Html {
  if (messaging.opted_out) {
    return html`<span class="window opted-out"><span class="visually-hidden">Reply window: </span>opted out</span>`;
  }
  const open = messaging.within_window;
  return html`<span class="window ${open ? "open" : "closed"}"><span class="visually-hidden">Reply window: </span>${windowText(messaging, now)}</span>`;
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
  return html`${direction} <span class="preview-body">${message.media ? html`${mediaPlaceholder(message.media)}${text ? " · " : ""}` : ""}${text ? shorten(text) : ""}</span>`;
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
  const handles = { phone: row.contact_phone, username: row.contact_username, user_id: row.contact_user_id };
  const label = contactLabel({ ...handles, name: row.contact_name });
  const status = row.direction === "outbound" ? row.status : null;
  const failed = status === "failed";
  // Not sent (yet, or ever): the thread's badge, so the last line does not read as a message sent.
  const unsent = status === "canceled" || status === "scheduled" ? status : null;
  // A row keeps the narrowing: the conversation it opens has its sidebar narrowed alike.
  const href = narrowedPath(conversationPath(row.contact_id), input.narrowing ?? {});
  return html`<li class="conversation${unread > 0 ? " is-unread" : ""}${failed ? " is-failed" : ""}${unsent ? ` is-${unsent}` : ""}${pinned ? " is-pinned" : ""}">
<a class="conversation-link" id="conversation-${row.contact_id}" href="${href}"${isCurrent ? html` aria-current="page"` : ""}>
<span class="conversation-name">${label}</span>
<span class="conversation-time">${timeTag(row.last_message_at, input.now)}</span>
<span class="conversation-phone">${row.contact_name?.trim() ? contactHandle(handles) : ""}</span>
<span class="conversation-unread">${unread > 0 ? html`<span class="badge count unread-badge">${unread}<span class="visually-hidden"> unread message${unread === 1 ? "" : "s"}</span></span>` : ""}</span>
<span class="conversation-preview">${lastMessageLine(row)}</span>
<span class="conversation-window">${windowBadge(messaging, input.now)}${failed ? html` <span class="badge bad failed-marker"><span aria-hidden="true">!</span> Failed<span class="visually-hidden">: the last message was not delivered</span></span>` : ""}${unsent ? html` ${statusBadge(unsent)}` : ""}${pinned ? html` <span class="pinned-note">shown because it is open</span>` : ""}</span>
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
