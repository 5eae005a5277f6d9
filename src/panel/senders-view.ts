import type { TemplateButton } from "../channel/provider.ts";
import type { SenderRow } from "../senders/repository.ts";
import { storedComponents, type TemplateRow } from "../templates/repository.ts";
import { headerText, templateButtons } from "../templates/variables.ts";
import type { PanelSession } from "../users/service.ts";
import { type Html, html } from "./html.ts";
import { csrfInput, durationText, page, timeTag } from "./layout.ts";
import { cell, columnHeaders } from "./list-view.ts";
import { PANEL_PREFIX } from "./paths.ts";
import { highlightVariables, rejectionReason } from "./template-view.ts";

/** The Senders & templates page; senders.ts gathers what it shows. */

export const SENDERS_PATH = `${PANEL_PREFIX}/senders`;

/** What a "Sync now" did, shown on the sender it was for. */
export interface SyncNotice {
  senderId: string;
  ok: boolean;
  /** Why it failed (the provider's answer, or the sender's state). */
  reason?: string;
}

export interface ChannelQuota {
  channel: string;
  used: number;
  quota: number;
  /** Seconds until the quota resets (00:00 UTC). */
  resetsInSeconds: number;
}

export interface SenderView {
  sender: SenderRow;
  templates: TemplateRow[];
  /** Outbound messages accepted today (UTC) from this sender. */
  sentToday: number;
}

const CHANNEL_NAMES: Record<string, string> = { whatsapp: "WhatsApp" };

const STATUS_BADGES: Record<string, { tone: string; label: string }> = {
  APPROVED: { tone: "ok", label: "Approved" },
  PENDING: { tone: "warn", label: "Pending" },
  REJECTED: { tone: "bad", label: "Rejected" },
};

function statusBadge(status: string): Html {
  const known = STATUS_BADGES[status];
  const label = known?.label ?? status.charAt(0) + status.slice(1).toLowerCase();
  return html`<span class="badge${known ? ` ${known.tone}` : ""}" title="${status}">${label}</span>`;
}

function capitalized(value: string): string {
  return value.charAt(0).toUpperCase() + value.slice(1).toLowerCase();
}

function plural(n: number, one: string, many: string): string {
  return `${n.toLocaleString("en-US")} ${n === 1 ? one : many}`;
}

function buttonText(button: TemplateButton): Html {
  if (button.type === "URL")
    return html`${button.text} → <span class="mono">${highlightVariables(button.url)}</span>`;
  if (button.type === "PHONE_NUMBER")
    return html`${button.text} → <span class="mono">${button.phone_number}</span>`;
  return html`${button.text}`;
}

function preview(template: TemplateRow): Html {
  const components = storedComponents(template);
  const header = headerText(components);
  const buttons = templateButtons(components);
  return html`<div class="template-preview">
  ${header !== null ? html`<p class="preview-header">${highlightVariables(header)}</p>` : ""}
  <p class="preview-body">${template.preview ? highlightVariables(template.preview) : html`<span class="muted">(no text)</span>`}</p>
  ${
    buttons.length > 0
      ? html`<ul class="preview-buttons" aria-label="Buttons">${buttons.map((b) => html`<li class="chip">${buttonText(b)}</li>`)}</ul>`
      : ""
  }
</div>`;
}

function templateTable(view: SenderView): Html {
  const { sender, templates } = view;
  const titleId = `templates-${sender.id}`;
  if (templates.length === 0) {
    return html`<h3 id="${titleId}">Templates</h3>
<p class="muted">${
      sender.templates_synced_at
        ? "The provider reports no templates for this number. Templates created and approved in WhatsApp Manager appear here after the next sync."
        : html`Templates have not been synced yet; they appear after the next sync (use “Sync now” above, or an operator can run <code>bun run cli templates sync</code>).`
    }</p>`;
  }
  const approved = templates.filter((t) => t.status === "APPROVED").length;
  return html`<h3 id="${titleId}">Templates <span class="muted small">${approved} of ${templates.length} approved</span></h3>
<div class="table-wrap" role="region" aria-labelledby="${titleId}" tabindex="0">
<table class="list cards templates" role="table" aria-labelledby="${titleId}">
  ${columnHeaders(["Name", "Language", "Category", "Status", "Header", "Preview"])}
  <tbody role="rowgroup">
  ${templates.map(
    (t) => html`<tr role="row">
    <th scope="row" role="rowheader" class="template-name"><code>${t.name}</code></th>
    ${cell("Language", html`<code>${t.language}</code>`)}
    ${cell("Category", capitalized(t.category))}
    ${cell(
      "Status",
      t.status === "REJECTED"
        ? html`<span class="status-stack">${statusBadge(t.status)}<span class="rejection-reason small">${t.rejected_reason ? html`Reason: ${rejectionReason(t.rejected_reason)}` : html`<span class="muted">The provider gave no reason.</span>`}</span></span>`
        : statusBadge(t.status),
    )}
    ${cell("Header", t.header_format ? capitalized(t.header_format) : html`<span class="muted">—</span>`)}
    ${cell("Preview", preview(t), "preview-cell")}
  </tr>`,
  )}
  </tbody>
</table>
</div>
<p class="hint">Only approved templates can be sent. <mark class="var">{{1}}</mark> marks a variable your system fills in when it sends the template.</p>`;
}

/** "Sync now": asks the provider for this sender's templates at once (a plain form; no script needed). */
function syncForm(sender: SenderRow, csrf: string): Html {
  return html`<form method="post" action="${SENDERS_PATH}/${encodeURIComponent(sender.id)}/sync-templates" class="sync-form">
  ${csrfInput(csrf)}
  <button type="submit" class="button subtle">Sync now<span class="visually-hidden"> the templates of ${sender.name ?? sender.phone_number}</span></button>
</form>`;
}

function syncNotice(notice: SyncNotice | undefined, sender: SenderRow): Html | "" {
  if (!notice || notice.senderId !== sender.id) return "";
  return notice.ok
    ? html`<p class="notice" role="status">Templates synced just now: this list is what the provider reports.</p>`
    : html`<p class="error" role="alert"><strong>Templates were not synced.</strong> ${notice.reason ?? ""}</p>`;
}

function senderCard(view: SenderView, now: Date, csrf: string, notice?: SyncNotice): Html {
  const { sender } = view;
  const headingId = `sender-${sender.id}`;
  return html`<section class="card sender${sender.active ? "" : " is-inactive"}" aria-labelledby="${headingId}">
<div class="sender-head">
  <h2 id="${headingId}">${sender.name ?? sender.phone_number}${sender.name ? html` <span class="muted phone">${sender.phone_number}</span>` : ""}</h2>
  ${sender.active ? html`<span class="badge ok">Active</span>` : html`<span class="badge">Inactive</span>`}
</div>
${
  sender.active
    ? ""
    : html`<p class="muted">Deactivated by an operator: it no longer sends, and sends that name it are refused.</p>`
}
<dl class="facts">
  <div><dt>Phone number</dt><dd class="mono">${sender.phone_number}</dd></div>
  <div><dt>Sender ID</dt><dd><code>${sender.id}</code></dd></div>
  <div><dt>Provider phone number ID</dt><dd><code>${sender.provider_phone_number_id}</code></dd></div>
  <div><dt>Throughput</dt><dd>${plural(sender.mps, "message", "messages")} per second <span class="muted">at most, all workers together</span></dd></div>
  <div><dt>Templates synced</dt><dd class="synced">${sender.templates_synced_at ? timeTag(sender.templates_synced_at, now) : "never"}${sender.active ? syncForm(sender, csrf) : ""}</dd></div>
  <div><dt>Sent today</dt><dd><strong>${plural(view.sentToday, "message", "messages")}</strong> <span class="muted">accepted since 00:00 UTC</span></dd></div>
</dl>
${syncNotice(notice, sender)}
${templateTable(view)}
</section>`;
}

function quotaCard(quotas: ChannelQuota[]): Html {
  return html`<section class="card quota section-card" aria-labelledby="quota-title">
<h2 id="quota-title">Today's sending quota</h2>
${quotas.map((q) => {
  const id = `quota-${q.channel}`;
  const name = CHANNEL_NAMES[q.channel] ?? capitalized(q.channel);
  const text = `${q.used.toLocaleString("en-US")} of ${q.quota.toLocaleString("en-US")} sent today`;
  const full = q.quota > 0 && q.used >= q.quota;
  return html`<div class="quota-row">
  <div class="quota-label">${q.quota > 0 ? html`<label for="${id}">${name}</label>` : name}${full ? html` <span class="badge bad">Used up</span>` : ""}</div>
  ${
    q.quota > 0
      ? html`<meter id="${id}" min="0" max="${q.quota}" value="${Math.min(q.used, q.quota)}" low="${Math.floor(q.quota * 0.75)}" high="${Math.floor(q.quota * 0.9)}" optimum="0">${text}</meter>`
      : ""
  }
  <p class="quota-text"><strong>${q.quota > 0 ? text : "Sending is switched off (daily quota 0)"}</strong> <span class="muted">(resets 00:00 UTC, in ${durationText(q.resetsInSeconds)})</span></p>
</div>`;
})}
<p class="hint">Counts the messages your applications sent today that were accepted, across all senders of the channel. When it is used up, sends are refused with <code>quota_exceeded</code> until 00:00 UTC.</p>
</section>`;
}

/** How long the tenant's messages are kept (src/maintenance/retention.ts), in the words of a day count. */
function retentionText(days: number): string {
  if (days >= 1) return plural(Math.round(days * 10) / 10, "day", "days");
  const minutes = Math.max(1, Math.round(days * 1440));
  return minutes >= 120
    ? plural(Math.round(minutes / 60), "hour", "hours")
    : plural(minutes, "minute", "minutes");
}

function retentionCard(days: number): Html {
  return html`<section class="card section-card" aria-labelledby="retention-title">
<h2 id="retention-title">Message history</h2>
<p>Messages are kept <strong>${retentionText(days)}</strong>. Older ones are removed with their events, and a conversation whose messages are all gone leaves the list; contacts and their opt-outs stay.</p>
<p class="hint">Your operator sets this with <code>bun run cli tenant retention</code>. Read the feed and the events more often than this, or what is older than the bound is gone before you read it.</p>
</section>`;
}

export function sendersPage(input: {
  session: PanelSession;
  csrf: string;
  now: Date;
  senders: SenderView[];
  quotas: ChannelQuota[];
  retentionDays: number;
  notice?: SyncNotice;
}): Html {
  const { senders } = input;
  const active = senders.filter((s) => s.sender.active).length;
  return page({
    title: "Senders & templates",
    section: "senders",
    session: input.session,
    csrf: input.csrf,
    body: html`<div class="page-head">
  <h1>Senders &amp; templates</h1>
  ${senders.length > 0 ? html`<p class="muted head-meta">${plural(active, "active sender", "active senders")}${senders.length > active ? `, ${senders.length - active} inactive` : ""}</p>` : ""}
</div>
<p class="lead muted">The WhatsApp numbers your messages are sent from, and the message templates of each. Outside a customer's 24-hour window only an approved template can be sent.</p>
${quotaCard(input.quotas)}
${retentionCard(input.retentionDays)}
${
  senders.length === 0
    ? html`<section class="card blank-slate section-card">
  <h2>No senders connected yet</h2>
  <p>A sender is a WhatsApp Business phone number connected to your account. Senders are connected by an operator of this service with <code>bun run cli sender create</code>, which also loads the number's templates. Ask your operator to connect your number; it then appears here with its templates.</p>
</section>`
    : html`<div class="senders stack">${senders.map((s) => senderCard(s, input.now, input.csrf, input.notice))}</div>`
}`,
  });
}
