import { API_PREFIX } from "../http/paths.ts";
import { ENVELOPE_SVG, FAVICON_LINKS } from "../lib/favicon.ts";
import type { PanelSession } from "../users/service.ts";
import { type Html, html, unsafeRaw } from "./html.ts";
import { CSRF_FIELD, CSRF_HEADER, PANEL_PREFIX } from "./paths.ts";

/** Bumped when an asset changes, so browsers fetch it again (assets are cached for a day). */
export const ASSET_VERSION = "5";

export type PanelSection = "conversations" | "applications" | "senders" | "webhooks";

const SECTIONS: { id: PanelSection; label: string; href: string }[] = [
  { id: "conversations", label: "Conversations", href: `${PANEL_PREFIX}/conversations` },
  { id: "applications", label: "Applications", href: `${PANEL_PREFIX}/applications` },
  { id: "senders", label: "Senders & templates", href: `${PANEL_PREFIX}/senders` },
  { id: "webhooks", label: "Webhooks", href: `${PANEL_PREFIX}/webhooks` },
];

function head(title: string): Html {
  return html`<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false}'>
<title>${title} · Messaging panel</title>
${unsafeRaw(FAVICON_LINKS)}
<link rel="stylesheet" href="${PANEL_PREFIX}/assets/panel.css?v=${ASSET_VERSION}">
<script src="${PANEL_PREFIX}/assets/htmx.min.js?v=${ASSET_VERSION}" defer></script>
<script src="${PANEL_PREFIX}/assets/panel.js?v=${ASSET_VERSION}" defer></script>
</head>`;
}

/** The API's pages for people, on the same origin as the panel (src/docs/). */
export const DOCS_LINKS = [
  { label: "API reference", href: `${API_PREFIX}/reference` },
  { label: "API docs & error codes", href: `${API_PREFIX}/docs` },
] as const;

/** Every page's footer: the way from the panel to the docs and the reference. */
function footer(): Html {
  return html`<footer class="site-footer">
  <nav aria-label="Developer documentation">
    <ul>${DOCS_LINKS.map((link) => html`<li><a href="${link.href}">${link.label}</a></li>`)}</ul>
  </nav>
</footer>`;
}

/** A page of the signed-in panel: header with navigation and sign-out, then `body` in <main>. */
export function page(input: {
  title: string;
  section: PanelSection;
  session: PanelSession;
  csrf: string;
  body: Html;
}): Html {
  const { session, csrf } = input;
  // htmx sends the CSRF token on every request it makes from inside <body>.
  const hxHeaders = JSON.stringify({ [CSRF_HEADER]: csrf });
  return html`<!doctype html>
<html lang="en">
${head(input.title)}
<body hx-headers="${hxHeaders}">
<a class="skip-link" href="#main">Skip to content</a>
<header class="topbar">
  <div class="brand"><span class="brand-mark">${unsafeRaw(ENVELOPE_SVG)}</span> <span>${session.tenantName}</span></div>
  <nav aria-label="Panel">
    <ul>
      ${SECTIONS.map(
        (s) =>
          html`<li><a href="${s.href}"${s.id === input.section ? html` aria-current="page"` : ""}>${s.label}</a></li>`,
      )}
    </ul>
  </nav>
  <a class="docs-link" href="${DOCS_LINKS[0].href}">API docs</a>
  <form class="signout" method="post" action="${PANEL_PREFIX}/sign-out">
    ${csrfInput(csrf)}
    <span class="who">${session.email}</span>
    <button type="submit" class="button subtle">Sign out</button>
  </form>
</header>
<main id="main" tabindex="-1">
${input.body}
</main>
${footer()}
</body>
</html>`;
}

/** A page outside the signed-in frame: sign-in, errors. */
export function simplePage(title: string, body: Html): Html {
  return html`<!doctype html>
<html lang="en">
${head(title)}
<body class="simple">
<main id="main" class="narrow">
${body}
</main>
${footer()}
</body>
</html>`;
}

export function errorPage(status: number, title: string, message: string, requestId?: string): Html {
  return simplePage(
    title,
    html`<h1>${title}</h1>
<p>${message}</p>
${requestId ? html`<p class="muted">Reference: <code>${requestId}</code> (HTTP ${status})</p>` : ""}
<p><a class="button" href="${PANEL_PREFIX}">Back to the panel</a></p>`,
  );
}

/** Relative time for humans ("3 min ago", "in 2 h 5 min"); the exact time is in a title/datetime. */
export function timeTag(date: Date, now: Date): Html {
  return html`<time datetime="${date.toISOString()}" title="${date.toISOString().replace("T", " ").slice(0, 16)} UTC">${relativeTime(date, now)}</time>`;
}

export function relativeTime(date: Date, now: Date): string {
  const seconds = Math.round((date.getTime() - now.getTime()) / 1000);
  const span = Math.abs(seconds);
  let text: string;
  if (span < 45) return "just now";
  // Whole minutes first, so 59 min 40 s reads "1 h", not "60 min".
  const minutes = Math.round(span / 60);
  if (minutes < 60) text = `${minutes} min`;
  else if (span < 86_400) text = durationText(minutes * 60);
  else if (span < 7 * 86_400) text = `${Math.round(span / 86_400)} d`;
  else return date.toISOString().slice(0, 10);
  return seconds < 0 ? `${text} ago` : `in ${text}`;
}

/** "5 h 12 min", "1 h", "48 min". */
export function durationText(seconds: number): string {
  const hours = Math.floor(seconds / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  if (hours === 0) return `${Math.max(1, minutes)} min`;
  return minutes === 0 ? `${hours} h` : `${hours} h ${minutes} min`;
}

/** The CSRF token as a plain form carries it (htmx sends it as a header, see `page`). */
export function csrfInput(csrf: string): Html {
  return html`<input type="hidden" name="${CSRF_FIELD}" value="${csrf}">`;
}

/** Why a form was refused, above it: what was not done, then each reason; nothing without one. */
export function formErrors(id: string, heading: string, messages: string[]): Html | "" {
  if (messages.length === 0) return "";
  return html`<div class="error" role="alert" id="${id}">
  <p><strong>${heading}</strong></p>
  <ul class="bullets">${messages.map((m) => html`<li>${m}</li>`)}</ul>
</div>`;
}

/** A destructive action's confirmation (revoke, delete): post it with the danger button, or cancel. */
export function confirmForm(csrf: string, action: string, label: string, cancelHref: string): Html {
  return html`<form method="post" action="${action}" class="row">
    ${csrfInput(csrf)}
    <button type="submit" class="button danger">${label}</button>
    <a class="button" href="${cancelHref}">Cancel</a>
  </form>`;
}
