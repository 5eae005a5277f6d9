import { API_ERRORS, OAUTH_ERRORS } from "../http/errors.ts";
import { FAVICON_LINKS } from "../lib/favicon.ts";
import { renderFailureSection } from "./failure-section.ts";

const escapeHtml = (text: string) =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");

/** Inline `code` spans in catalogue prose. */
const prose = (text: string) => escapeHtml(text).replace(/`([^`]+)`/g, "<code>$1</code>");

/**
 * DESIGN §14: WhatsApp users may adopt a username and hide their phone number; the provider then
 * names them by a business-scoped user id (BSUID). What that changes for an integrator.
 */
const PHONELESS_SECTION = `<h2 id="customers-without-a-phone-number">Customers without a phone number</h2>
<p>Since 2026 a WhatsApp user may adopt a username and withhold their phone number. WhatsApp then names them
by a <strong>business-scoped user id</strong> (BSUID): their stable id for your business, a country code, a dot
and up to 128 letters and digits (<code>DE.1502576394655843</code>; a parent BSUID shared by linked business
portfolios looks like <code>US.ENT.1181…</code>). No message from such a customer is lost: it is stored and
shown like any other.</p>
<ul>
<li><strong>Contact.</strong> Every Contact, and the <code>contact</code> of every FeedMessage, Conversation and
event, carries <code>user_id</code> (the BSUID), <code>parent_user_id</code> and <code>username</code> besides
<code>phone</code>; <code>phone</code> is <code>null</code> when the customer withholds it. A username is shown,
never a key: customers change it.</li>
<li><strong>Finding a contact.</strong> <code>GET /v2/contacts?user_id=DE.1502576394655843</code> finds the contact
by its BSUID, one it had before, or its parent BSUID, as <code>?phone=</code> finds one by number (exactly one of
the two).</li>
<li><strong>Sending.</strong> <code>to</code> takes a phone number or a BSUID, in single sends, batch items and
scheduled sends alike; <code>contact</code> works for every contact. A contact with a phone is reached by phone;
one without, by its BSUID. <strong>Authentication templates</strong> (one-time codes) go to phone numbers only:
one to a contact without a phone is refused with <a href="#recipient_phone_required"><code>recipient_phone_required</code></a>.</li>
<li><strong>One person, one contact.</strong> When the customer later shares their number, or a contact known by
phone turns out to have the BSUID of another, the two are merged: the older contact survives and keeps its id,
the younger's messages, conversation and opt-out move to it, and a <code>contact.merged</code> event
<code>{survivor, merged}</code> is sent. A merged id keeps working: <code>GET /v2/contacts/{id}</code>, its
history and <code>contact</code> in a send resolve to the survivor (whose <code>id</code> differs).</li>
<li><strong>Changes.</strong> A changed number replaces the contact's <code>phone</code> (the old number no longer
finds it); a changed BSUID replaces <code>user_id</code>, and the old one still finds the contact.</li>
</ul>`;

/** `{base_url}/docs`: one anchor per error code (the `doc_url` of every error points here). */
export function renderDocsPage(baseUrl: string): string {
  const apiRows = Object.entries(API_ERRORS)
    .map(
      ([code, e]) => `<section id="${code}"><h3><a href="#${code}">${code}</a></h3>
<p class="meta">HTTP ${e.status} · <code>${e.type}</code></p>
<p>${prose(e.meaning)}</p><p><strong>What to do:</strong> ${prose(e.action)}</p></section>`,
    )
    .join("\n");
  const oauthRows = Object.entries(OAUTH_ERRORS)
    .map(
      ([
        code,
        e,
      ]) => `<section id="oauth-${code}"><h3><a href="#oauth-${code}">${code}</a> <small>(token endpoint)</small></h3>
<p class="meta">HTTP ${e.status}</p><p>${prose(e.meaning)}</p><p><strong>What to do:</strong> ${prose(e.action)}</p></section>`,
    )
    .join("\n");
  // Where the browser finds the reference (a proxy may mount the API elsewhere); the panel is at the root.
  const basePath = new URL(baseUrl).pathname.replace(/\/+$/, "");
  return withContents(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Errors · Messaging API v2</title>
${FAVICON_LINKS}
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}
h1{font-size:1.6rem}h2{margin-top:2.5rem;border-bottom:1px solid #ddd}h3{margin-bottom:.2rem}
section{padding:.5rem 0}section:target{background:#fff7d6;outline:.5rem solid #fff7d6}
code{background:#f2f2f2;padding:0 .25rem;border-radius:3px}.meta{color:#555;margin:0}a{color:#0b57d0}
.site-nav ul{list-style:none;display:flex;flex-wrap:wrap;gap:.25rem 1.25rem;margin:0 0 1.5rem;padding:0 0 .6rem;border-bottom:1px solid #ddd}
.toc{background:#f7f7f8;border:1px solid #ddd;border-radius:8px;padding:.25rem 1.25rem 1rem;margin:1.5rem 0}
.toc h2{margin-top:.75rem;border:0}.toc>ol{padding-left:1.25rem}.toc>ol>li{margin:.4rem 0}
.toc ul{columns:3 12rem;column-gap:1.5rem;padding-left:1rem;margin:.3rem 0;font-size:.92rem}
.toc ul li{break-inside:avoid}
@media (prefers-color-scheme:dark){body{background:#111;color:#e6e6e6}code{background:#2a2a2a}.meta{color:#aaa}a{color:#8ab4f8}
.toc{background:#1a1a1a;border-color:#333}section:target{background:#3a3000;outline-color:#3a3000}.site-nav ul,h2{border-color:#333}}
</style></head><body>
<header><nav class="site-nav" aria-label="Developer documentation"><ul>
<li><a href="${escapeHtml(basePath)}/docs" aria-current="page">Docs &amp; error codes</a></li>
<li><a href="${escapeHtml(basePath)}/reference">API reference</a></li>
<li><a href="${escapeHtml(basePath)}/openapi.json">openapi.json</a></li>
<li><a href="/panel">Panel</a></li>
</ul></nav></header>
<h1>Messaging API v2 — errors</h1>
<p>Every error from <code>${escapeHtml(baseUrl)}</code> has the envelope
<code>{"error": {"type", "code", "message", "param", "request_id", "doc_url"}}</code>. Branch on <code>code</code>;
<code>message</code> is for people. Quote <code>request_id</code> (also the <code>Request-Id</code> header) when you contact support.
The machine-readable reference is <a href="${escapeHtml(baseUrl)}/openapi.json">openapi.json</a>.</p>
${PHONELESS_SECTION}
<h2>API error codes</h2>
${apiRows}
${renderFailureSection()}
<h2>Token endpoint errors</h2>
<p>POST /oauth/token answers errors as <code>{"error", "error_description", "request_id"}</code> (RFC 6749 §5.2).</p>
${oauthRows}
</body></html>`);
}

/** Text of a piece of markup, for the table of contents. */
const textOf = (markup: string) =>
  markup
    .replace(/<[^>]+>/g, "")
    .replace(/\s+/g, " ")
    .trim();

const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "");

/**
 * A table of contents before the first `<h2>`: each `<h2>` (given an id from its text when it has
 * none), and under it the anchored entries (`<section id>` with an `<h3>`) that follow it. Built from
 * the page itself, so a section added to the page is listed without more work.
 */
function withContents(page: string): string {
  const start = page.indexOf("<h2");
  if (start < 0) return page;
  const body = page
    .slice(start)
    .replace(/<h2(?![^>]*\sid=)([^>]*)>([\s\S]*?)<\/h2>/g, (_all, attributes: string, inner: string) => {
      return `<h2 id="${slug(textOf(inner))}"${attributes}>${inner}</h2>`;
    });
  const groups: { id: string; title: string; entries: { id: string; title: string }[] }[] = [];
  const headings =
    /<h2[^>]*\sid="([^"]+)"[^>]*>([\s\S]*?)<\/h2>|<section[^>]*\sid="([^"]+)"[^>]*>\s*<h3[^>]*>([\s\S]*?)<\/h3>/g;
  for (const match of body.matchAll(headings)) {
    const [, h2Id, h2Inner, sectionId, h3Inner] = match;
    if (h2Id && h2Inner !== undefined) groups.push({ id: h2Id, title: textOf(h2Inner), entries: [] });
    else if (sectionId && h3Inner !== undefined) {
      // The entry's name is its heading's link text (the code), without the notes beside it.
      const linked = /<a[^>]*>([\s\S]*?)<\/a>/.exec(h3Inner)?.[1];
      groups.at(-1)?.entries.push({ id: sectionId, title: textOf(linked ?? h3Inner) });
    }
  }
  if (groups.length === 0) return page;
  const toc = `<nav class="toc" aria-labelledby="contents"><h2 id="contents">Contents</h2><ol>
${groups
  .map(
    // Ids and titles come from the page's own markup, escaped already.
    (group) =>
      `<li><a href="#${group.id}">${group.title}</a>${
        group.entries.length > 0
          ? `<ul>${group.entries.map((entry) => `<li><a href="#${entry.id}"><code>${entry.title}</code></a></li>`).join("")}</ul>`
          : ""
      }</li>`,
  )
  .join("\n")}
</ol></nav>
`;
  return page.slice(0, start) + toc + body;
}
