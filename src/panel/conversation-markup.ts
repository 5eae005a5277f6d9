import { createHash } from "node:crypto";
import { failureDocAnchor } from "../channel/failure-codes.ts";
import type { MessagingState } from "../contacts/messaging-state.ts";
import { API_PREFIX } from "../http/paths.ts";
import { type Html, html } from "./html.ts";
import { durationText } from "./layout.ts";
import { PANEL_PREFIX } from "./paths.ts";

/**
 * What every part of the Conversations markup shares: the section's paths, the poll's version and
 * query string, a contact's name, exact times and the window's time left.
 */

export const CONVERSATIONS_PATH = `${PANEL_PREFIX}/conversations`;
export const LIST_FRAGMENT_PATH = `${CONVERSATIONS_PATH}/list`;
export const POLL_TRIGGER = "every 3s";
/** Where /v2/docs documents each failure code (its anchor: `failure-<code>`). */
export const FAILURE_DOCS_PATH = `${API_PREFIX}/docs`;

export function conversationPath(contactId: string): string {
  return `${CONVERSATIONS_PATH}/${encodeURIComponent(contactId)}`;
}

export function messagePath(contactId: string, messageId: string): string {
  return `${conversationPath(contactId)}/messages/${encodeURIComponent(messageId)}`;
}

/** A received message's media, from the provider (src/panel/inbound-media.ts). */
export function mediaPath(contactId: string, messageId: string): string {
  return `${messagePath(contactId, messageId)}/media`;
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

/** How a contact is known besides its name (DESIGN §14): its phone; without one its username, else its BSUID. */
export interface ContactHandles {
  phone: string | null;
  username?: string | null;
  user_id?: string | null;
}

export function contactHandle(contact: ContactHandles): string | null {
  return contact.phone || contact.username || contact.user_id || null;
}

export function contactLabel(contact: ContactHandles & { name: string | null }): string {
  return contact.name?.trim() || contactHandle(contact) || "Unknown contact";
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
export function secondsLeft(expires: string, now: Date): number {
  return Math.max(0, (Date.parse(expires) - now.getTime()) / 1000);
}

/** "open · closes in 5 h 12 min" or "closed" (SPEC §3: 24 h from the customer's last message). */
export function windowText(messaging: MessagingState, now: Date): string {
  if (!messaging.within_window || !messaging.window_expires_at) return "closed";
  return `open · closes in ${durationText(secondsLeft(messaging.window_expires_at, now))}`;
}
