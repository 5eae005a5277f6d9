import { API_ERRORS, OAUTH_ERRORS } from "../http/errors.ts";

const escapeHtml = (text: string) =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");

/** Inline `code` spans in catalogue prose. */
const prose = (text: string) => escapeHtml(text).replace(/`([^`]+)`/g, "<code>$1</code>");

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
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Errors · Messaging API v2</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1a1a1a}
h1{font-size:1.6rem}h2{margin-top:2.5rem;border-bottom:1px solid #ddd}h3{margin-bottom:.2rem}
section{padding:.5rem 0}section:target{background:#fff7d6;outline:.5rem solid #fff7d6}
code{background:#f2f2f2;padding:0 .25rem;border-radius:3px}.meta{color:#555;margin:0}a{color:#0b57d0}
</style></head><body>
<h1>Messaging API v2 — errors</h1>
<p>Every error from <code>${escapeHtml(baseUrl)}</code> has the envelope
<code>{"error": {"type", "code", "message", "param", "request_id", "doc_url"}}</code>. Branch on <code>code</code>;
<code>message</code> is for people. Quote <code>request_id</code> (also the <code>Request-Id</code> header) when you contact support.
The machine-readable reference is <a href="${escapeHtml(baseUrl)}/openapi.json">openapi.json</a>.</p>
<h2>API error codes</h2>
${apiRows}
<h2>Token endpoint errors</h2>
<p>POST /oauth/token answers errors as <code>{"error", "error_description", "request_id"}</code> (RFC 6749 §5.2).</p>
${oauthRows}
</body></html>`;
}
