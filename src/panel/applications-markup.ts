import type { ApplicationRecord } from "../applications/repository.ts";
import type { PanelSession } from "../users/service.ts";
import { type Html, html } from "./html.ts";
import { page } from "./layout.ts";
import { PANEL_PREFIX } from "./paths.ts";

/** What the Applications section's pages share: its path, its frame, an application's links and scopes. */

export const APPLICATIONS_PATH = `${PANEL_PREFIX}/applications`;

export interface Frame {
  session: PanelSession;
  csrf: string;
  now: Date;
}

/** A page of the Applications section. */
export function applicationsSection(frame: Frame, title: string, body: Html): Html {
  return page({ title, section: "applications", session: frame.session, csrf: frame.csrf, body });
}

/** "2026-05-04 10:30 UTC", in a <time> (the exact instant in `datetime`). */
export function utcTimeTag(date: Date): Html {
  const text = `${date.toISOString().replace("T", " ").slice(0, 16)} UTC`;
  return html`<time datetime="${date.toISOString()}" title="${text}">${text}</time>`;
}

export function appPath(application: ApplicationRecord, action: "revoke" | "rotate-secret"): string {
  return `${APPLICATIONS_PATH}/${encodeURIComponent(application.clientId)}/${action}`;
}

export function scopeBadges(scopes: readonly string[]): Html {
  return html`<ul class="scope-list">${scopes.map((s) => html`<li><code class="scope">${s}</code></li>`)}</ul>`;
}

/** To the rotation page, where the old secret's overlap is chosen (the page works without JavaScript). */
export function rotateLink(application: ApplicationRecord, label = "Rotate secret…"): Html {
  return html`<a class="button subtle" href="${appPath(application, "rotate-secret")}">${label}<span class="visually-hidden"> of ${application.name}</span></a>`;
}
