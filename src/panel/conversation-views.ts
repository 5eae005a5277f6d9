import type { MessagingState } from "../contacts/messaging-state.ts";
import { localTime, secondsLeft } from "./conversation-markup.ts";
import { type Html, html } from "./html.ts";
import { durationText, timeTag } from "./layout.ts";

export {
  type ListRegionInput,
  listPath,
  listTitle,
  narrowedPath,
  renderListRegion,
  renderListToolbar,
  titleUpdate,
} from "./conversation-list-view.ts";
export {
  CONVERSATIONS_PATH,
  contactLabel,
  conversationPath,
  FAILURE_DOCS_PATH,
  failureDocLink,
  LIST_FRAGMENT_PATH,
  localTime,
  mediaPath,
  messagePath,
  POLL_TRIGGER,
  query,
  versionOf,
  windowText,
} from "./conversation-markup.ts";
export { renderMessageDetailsBody } from "./conversation-message-view.ts";
export { isRetrying, renderMessageTimeline } from "./conversation-status-view.ts";
export { renderThreadRegion, type ThreadRegionInput } from "./conversation-thread-view.ts";

/**
 * Markup of the Conversations section: the list region (conversation-list-view.ts), the thread
 * region (conversation-thread-view.ts, its messages' parts in conversation-message-view.ts and their
 * statuses in conversation-status-view.ts) and, here, the window state and the announcements.
 * The two regions poll their own fragment URL with htmx every few seconds, passing the version (a
 * hash of what they show); the server answers 204 while nothing changed, so htmx leaves the page
 * alone. Polled markup never carries `autofocus`: an update must not move the user's focus.
 */

/** Polite announcements of what a poll brought (read by screen readers, invisible otherwise). */
export function announcer(id: string, text = ""): Html {
  return html`<p id="${id}" class="visually-hidden" role="status" aria-live="polite">${text}</p>`;
}

/** Out-of-band update of an announcer's text (its live region stays in place, so it is read). */
export function announce(id: string, text: string): Html {
  return html`<p id="${id}" hx-swap-oob="innerHTML">${text}</p>`;
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
