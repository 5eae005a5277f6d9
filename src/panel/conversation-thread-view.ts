import { presentMessageFields } from "../history/presenter.ts";
import {
  conversationPath,
  localTime,
  messagePath,
  POLL_TRIGGER,
  query,
  versionOf,
} from "./conversation-markup.ts";
import { messageFacts, messageMedia, notDelivered } from "./conversation-message-view.ts";
import type { ThreadMessageRow, ThreadPage } from "./conversation-messages.ts";
import { isRetrying, retryingLine, statusBadge } from "./conversation-status-view.ts";
import { type Html, html } from "./html.ts";

/** The thread region (`#thread`): a conversation's messages, each with its details disclosure. */

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
${failed && message.failure ? notDelivered(message.failure) : ""}
${retrying ? retryingLine(row, now) : ""}
${message.id ? messageDetailsDisclosure(row, contactId) : ""}
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
