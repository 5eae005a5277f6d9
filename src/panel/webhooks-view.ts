import { EVENT_TYPES } from "../events/schemas.ts";
import type { DeliveryAttempt } from "../push/attempt-log.ts";
import { ENDPOINTS_PER_TENANT } from "../push/schemas.ts";
import type { listWebhookEndpoints } from "../push/service.ts";
import type { PanelSession } from "../users/service.ts";
import { type Html, html } from "./html.ts";
import { confirmForm, csrfInput, durationText, formErrors, page, timeTag } from "./layout.ts";
import { cell, columnHeaders } from "./list-view.ts";
import { PANEL_PREFIX } from "./paths.ts";

/** The pages of the Webhooks section; webhooks.ts decides which one a request gets. */

export const WEBHOOKS_PATH = `${PANEL_PREFIX}/webhooks`;

export type Endpoint = Awaited<ReturnType<typeof listWebhookEndpoints>>[number];
export type EndpointAction = "test" | "replay" | "rotate-secret" | "status" | "delete";

export interface Frame {
  session: PanelSession;
  csrf: string;
  now: Date;
}

export interface EndpointView {
  endpoint: Endpoint;
  /** Newest first; null when the attempt log could not be read (Redis down). */
  attempts: DeliveryAttempt[] | null;
  /** A replay form that was refused: what was typed and why. */
  replay?: { since: string; error: string };
}

export interface NewEndpointForm {
  url: string;
  events: string[];
  description: string;
  errors?: { url?: string; events?: string; description?: string; form?: string };
}

/** What the last action did, shown once after its redirect. */
export type Notice =
  | { kind: "deleted"; endpointId: string }
  | { kind: "enabled" | "disabled" | "replayed"; endpoint: Endpoint }
  | { kind: "tested"; endpoint: Endpoint; eventId: string; attempt: DeliveryAttempt | undefined };

export function endpointPath(endpointId: string, action: EndpointAction): string {
  return `${WEBHOOKS_PATH}/${encodeURIComponent(endpointId)}/${action}`;
}

function webhooksSection(frame: Frame, title: string, body: Html): Html {
  return page({ title, section: "webhooks", session: frame.session, csrf: frame.csrf, body });
}

const at = (seconds: number) => new Date(seconds * 1000);

/** "12 s", "5 min", "3 h 2 min", "2 d 4 h": how far delivery lags. */
export function ageText(seconds: number): string {
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 86_400) return durationText(seconds);
  const days = Math.floor(seconds / 86_400);
  const hours = Math.floor((seconds % 86_400) / 3600);
  return hours === 0 ? `${days} d` : `${days} d ${hours} h`;
}

const DISABLED_REASONS: Record<string, string> = {
  failing: "Disabled automatically: an event could not be delivered for 3 days.",
  gone: "Disabled automatically: the receiver answered 410 Gone.",
};

function statusBadge(endpoint: Endpoint): Html {
  if (endpoint.status === "disabled") return html`<span class="badge bad">Disabled</span>`;
  const { last_failure: failure, last_success_at: success } = endpoint.delivery;
  // Enabled, but the latest outcome was a failure: retrying.
  if (failure && (success === null || failure.at > success))
    return html`<span class="badge warn">Failing</span>`;
  return html`<span class="badge ok">Enabled</span>`;
}

function statusText(endpoint: Endpoint): Html {
  if (endpoint.status === "enabled") return html``;
  const reason = endpoint.disabled_reason;
  const text = reason
    ? (DISABLED_REASONS[reason] ?? `Disabled automatically (${reason}).`)
    : "Disabled by you: nothing is posted. Enabled again, delivery resumes from its cursor, so nothing is missed.";
  return html`<p class="muted disabled-reason">${text}</p>`;
}

function eventList(events: readonly string[]): Html {
  return html`<ul class="scope-list">${events.map((e) => html`<li><code class="scope">${e}</code></li>`)}</ul>`;
}

function lastFailure(endpoint: Endpoint, now: Date): Html {
  const failure = endpoint.delivery.last_failure;
  if (!failure) return html`<span class="muted">none</span>`;
  return html`${timeTag(at(failure.at), now)}${failure.status_code !== null ? html` · HTTP ${failure.status_code}` : ""}
  <br><span class="small">${failure.error}</span>`;
}

function actionForm(
  frame: Frame,
  endpoint: Endpoint,
  action: EndpointAction,
  label: Html,
  options: {
    fields?: Html;
    confirm?: string;
    className?: string;
  } = {},
): Html {
  return html`<form method="post" action="${endpointPath(endpoint.id, action)}"${options.confirm ? html` data-confirm="${options.confirm}"` : ""}>
  ${csrfInput(frame.csrf)}${options.fields ?? ""}
  <button type="submit" class="button ${options.className ?? "subtle"}">${label}</button>
</form>`;
}

function endpointActions(frame: Frame, endpoint: Endpoint): Html {
  const hidden = html`<span class="visually-hidden"> for ${endpoint.url}</span>`;
  const enabled = endpoint.status === "enabled";
  return html`<div class="row endpoint-actions">
  ${actionForm(frame, endpoint, "test", html`Send test event${hidden}`)}
  ${actionForm(frame, endpoint, "rotate-secret", html`Rotate secret${hidden}`, {
    confirm: `Rotate the signing secret of ${endpoint.url}? The new one is shown once; the current one keeps signing for 24 hours, and a secret replaced before it stops now.`,
  })}
  ${actionForm(frame, endpoint, "status", html`${enabled ? "Disable" : "Enable"}${hidden}`, {
    fields: html`<input type="hidden" name="status" value="${enabled ? "disabled" : "enabled"}">`,
  })}
  <a class="button subtle danger-link" href="${endpointPath(endpoint.id, "delete")}">Delete…${hidden}</a>
</div>`;
}

function replayForm(frame: Frame, view: EndpointView): Html {
  const { endpoint, replay } = view;
  const inputId = `replay-since-${endpoint.id}`;
  const errorId = `${inputId}-error`;
  return html`<form method="post" action="${endpointPath(endpoint.id, "replay")}" class="stack replay" data-confirm="${`Replay events to ${endpoint.url}? Every event after the cursor is posted again, whether or not it was acknowledged before.`}">
  ${csrfInput(frame.csrf)}
  <div class="field">
    <label for="${inputId}">Replay from cursor</label>
    <input id="${inputId}" name="since" type="text" autocomplete="off" spellcheck="false" class="mono" maxlength="200" value="${replay?.since ?? ""}" placeholder="evc_…" aria-describedby="${inputId}-hint${replay ? ` ${errorId}` : ""}"${replay ? html` aria-invalid="true"` : ""}>
    <p class="hint" id="${inputId}-hint">An <code>evc_</code> cursor (a <code>next_cursor</code> of <code>GET /events</code>, or an earlier cursor of this endpoint); empty: from the oldest event kept (30 days). Every event after it is posted again.</p>
    ${replay ? html`<p class="field-error" id="${errorId}" role="alert">${replay.error}</p>` : ""}
  </div>
  <div><button type="submit" class="button">Replay<span class="visually-hidden"> to ${endpoint.url}</span></button></div>
</form>`;
}

function attemptTable(view: EndpointView, now: Date): Html {
  const titleId = `deliveries-${view.endpoint.id}`;
  const heading = html`<h3 id="${titleId}">Last deliveries</h3>`;
  if (view.attempts === null)
    return html`${heading}<p class="muted">The delivery log cannot be read right now; delivery itself is not affected.</p>`;
  if (view.attempts.length === 0)
    return html`${heading}<p class="muted">Nothing posted yet. Send a test event to see how your receiver answers.</p>`;
  return html`${heading}
<div class="table-wrap" role="region" aria-labelledby="${titleId}" tabindex="0">
<table class="list cards deliveries" role="table" aria-labelledby="${titleId}">
  ${columnHeaders(["Time", "Event", "Type", "Status", "Latency", "Outcome", "Error"])}
  <tbody role="rowgroup">
  ${view.attempts.map(
    (a) => html`<tr role="row">
    <th scope="row" role="rowheader">${timeTag(new Date(a.at), now)}</th>
    ${cell("Event", html`<code>${a.event_id}</code>`)}
    ${cell("Type", html`<code>${a.type}</code>`)}
    ${cell("Status", a.status_code === null ? html`<span class="muted">none</span>` : a.status_code)}
    ${cell("Latency", `${a.latency_ms} ms`)}
    ${cell(
      "Outcome",
      a.outcome === "acknowledged"
        ? html`<span class="badge ok">Acknowledged</span>`
        : html`<span class="badge bad">Failed</span>`,
    )}
    ${cell("Error", a.error ? html`<span class="small">${a.error}</span>` : html`<span class="muted">—</span>`)}
  </tr>`,
  )}
  </tbody>
</table>
</div>`;
}

/** How far delivery lags, for the collapsed card: what is pending, and since when. */
function lagText(endpoint: Endpoint): Html {
  const { pending, oldest_pending_age: age } = endpoint.delivery;
  if (pending === 0) return html`<span class="muted">Nothing pending</span>`;
  return html`<strong>${pending.toLocaleString("en-US")}</strong> pending${age === null ? "" : html`, oldest ${ageText(age)} old`}`;
}

/**
 * One endpoint: its URL, state and lag always in view (the <summary>), the rest (facts, actions,
 * replay, last deliveries) behind it, so that a page of several endpoints stays short.
 */
function endpointCard(frame: Frame, view: EndpointView, open: boolean): Html {
  const { endpoint } = view;
  const { delivery } = endpoint;
  const headingId = `endpoint-${endpoint.id}`;
  return html`<section class="card sender endpoint${endpoint.status === "disabled" ? " is-inactive" : ""}" id="${endpoint.id}" aria-labelledby="${headingId}">
<details class="endpoint-details" id="details-${endpoint.id}"${open ? html` open` : ""}>
<summary class="endpoint-summary" id="summary-${endpoint.id}">
  <span class="sender-head">
    <h2 id="${headingId}" class="mono">${endpoint.url}</h2>
    ${statusBadge(endpoint)}
  </span>
  <span class="endpoint-lag">${lagText(endpoint)}<span class="endpoint-toggle" aria-hidden="true"></span></span>
</summary>
${endpoint.description ? html`<p>${endpoint.description}</p>` : ""}
${statusText(endpoint)}
<dl class="facts">
  <div><dt>Endpoint ID</dt><dd><code>${endpoint.id}</code></dd></div>
  <div><dt>Created</dt><dd>${timeTag(at(endpoint.created), frame.now)}</dd></div>
  <div><dt>Pending events</dt><dd><strong>${delivery.pending.toLocaleString("en-US")}</strong></dd></div>
  <div><dt>Oldest pending</dt><dd>${delivery.oldest_pending_age === null ? html`<span class="muted">none pending</span>` : html`${ageText(delivery.oldest_pending_age)} old`}</dd></div>
  <div><dt>Last success</dt><dd>${delivery.last_success_at === null ? html`<span class="muted">never</span>` : timeTag(at(delivery.last_success_at), frame.now)}</dd></div>
  <div><dt>Last failure</dt><dd>${lastFailure(endpoint, frame.now)}</dd></div>
  <div><dt>Events</dt><dd>${endpoint.all_events ? html`<p class="small">Every type, including types added later:</p>` : ""}${eventList(endpoint.events)}</dd></div>
  <div><dt>Cursor</dt><dd><code class="small">${delivery.cursor}</code></dd></div>
</dl>
<h3>Actions</h3>
${endpointActions(frame, endpoint)}
${replayForm(frame, view)}
${attemptTable(view, frame.now)}
</details>
</section>`;
}

function outcomeText(attempt: DeliveryAttempt): string {
  const code = attempt.status_code === null ? "no HTTP status" : `HTTP ${attempt.status_code}`;
  return `${code} in ${attempt.latency_ms} ms`;
}

function noticeBlock(notice: Notice | undefined): Html {
  if (!notice) return html``;
  if (notice.kind === "deleted")
    return html`<p class="notice" role="status">Endpoint <code>${notice.endpointId}</code> is deleted: nothing more is posted to it.</p>`;
  const url = html`<span class="mono">${notice.endpoint.url}</span>`;
  if (notice.kind !== "tested") {
    const said = {
      enabled: html`${url} is enabled: delivery resumes from its cursor.`,
      disabled: html`${url} is disabled: nothing is posted to it until you enable it again.`,
      replayed: html`Replay started: the events after the cursor are being posted to ${url} again.`,
    }[notice.kind];
    return html`<p class="notice" role="status">${said}</p>`;
  }
  const { attempt } = notice;
  if (!attempt)
    return html`<p class="notice" role="status">Test event <code>${notice.eventId}</code> was posted to ${url}; its outcome is no longer in the delivery log.</p>`;
  if (attempt.outcome === "acknowledged")
    return html`<p class="notice test-outcome" role="status"><strong>Test event acknowledged</strong> by ${url}: ${outcomeText(attempt)}. Event <code>${attempt.event_id}</code>.</p>`;
  return html`<div class="error test-outcome" role="alert"><p><strong>Test event not acknowledged</strong> by ${url}: ${outcomeText(attempt)}.</p><p>${attempt.error ?? ""}</p><p class="small">Event <code>${attempt.event_id}</code>.</p></div>`;
}

function newEndpointForm(frame: Frame, form: NewEndpointForm, full: boolean): Html {
  const errors = form.errors ?? {};
  const messages = [errors.form, errors.url, errors.events, errors.description].filter((m): m is string =>
    Boolean(m),
  );
  return html`<section class="card new-application" id="new-endpoint" aria-labelledby="new-endpoint-title">
<h2 id="new-endpoint-title">New endpoint</h2>
${formErrors("new-endpoint-errors", "The endpoint was not created.", messages)}
${full ? html`<p class="muted">You have ${ENDPOINTS_PER_TENANT} endpoints, the most an account may have: delete one to add another.</p>` : ""}
<form method="post" action="${WEBHOOKS_PATH}" class="stack app-form">
  ${csrfInput(frame.csrf)}
  <div class="field">
    <label for="endpoint-url">URL</label>
    <input id="endpoint-url" name="url" type="text" inputmode="url" required maxlength="2048" autocomplete="off" spellcheck="false" value="${form.url}" aria-describedby="endpoint-url-hint${errors.url ? " endpoint-url-error" : ""}"${errors.url ? html` aria-invalid="true" autofocus` : ""}>
    <p class="hint" id="endpoint-url-hint">Where events are posted: an <code>https</code> URL on a public host, for example <code>https://example.com/webhooks/messaging</code>.</p>
    ${errors.url ? html`<p class="field-error" id="endpoint-url-error">${errors.url}</p>` : ""}
  </div>
  <fieldset class="field scopes">
    <legend>Event types</legend>
    <p class="hint" id="endpoint-events-hint">Leave all unchecked to receive every type.</p>
    ${EVENT_TYPES.map(
      (type) =>
        html`<label class="check"><input type="checkbox" name="events" value="${type}"${form.events.includes(type) ? html` checked` : ""} aria-describedby="endpoint-events-hint"> <code>${type}</code></label>`,
    )}
    ${errors.events ? html`<p class="field-error">${errors.events}</p>` : ""}
  </fieldset>
  <div class="field">
    <label for="endpoint-description">Description <span class="muted small">(optional)</span></label>
    <input id="endpoint-description" name="description" type="text" maxlength="500" autocomplete="off" value="${form.description}"${errors.description ? html` aria-invalid="true"` : ""}>
    ${errors.description ? html`<p class="field-error">${errors.description}</p>` : ""}
  </div>
  <div><button type="submit" class="button primary"${full ? html` disabled` : ""}>Create endpoint</button></div>
</form>
</section>`;
}

export function webhooksPage(
  frame: Frame,
  input: { endpoints: EndpointView[]; form: NewEndpointForm; notice?: Notice },
): Html {
  const { endpoints, notice } = input;
  const full = endpoints.length >= ENDPOINTS_PER_TENANT;
  // The endpoint the last action was about shows its details (and its outcome); so does a lone one.
  const about = notice && notice.kind !== "deleted" ? notice.endpoint.id : undefined;
  const opened = (view: EndpointView) =>
    endpoints.length === 1 || view.replay !== undefined || view.endpoint.id === about;
  return webhooksSection(
    frame,
    "Webhooks",
    html`<div class="page-head">
  <h1>Webhooks</h1>
  ${endpoints.length > 0 ? html`<p class="muted head-meta">${endpoints.length} of ${ENDPOINTS_PER_TENANT} endpoints</p>` : ""}
</div>
<p class="lead muted">Events about your messages (${EVENT_TYPES.map((type, i) => html`${i > 0 ? ", " : ""}<code>${type}</code>`)}) are posted to your endpoints as they happen, in order per contact, signed per Standard Webhooks. An endpoint that is down gets every event once it answers again.</p>
${noticeBlock(notice)}
${
  endpoints.length === 0
    ? html`<section class="card blank-slate section-card">
  <h2>No endpoints yet</h2>
  <p>Add the URL of a receiver in your system below. It gets a signing secret to verify each delivery with, and receives the events that happen from then on.</p>
</section>`
    : html`<div class="endpoints stack">${endpoints.map((view) => endpointCard(frame, view, opened(view)))}</div>`
}
${newEndpointForm(frame, input.form, full)}`,
  );
}

/** The one and only time an endpoint's secret is shown: after create and after rotate. */
export function endpointSecretPage(
  frame: Frame,
  input: { endpoint: Endpoint; secret: string; rotated: boolean },
): Html {
  const { endpoint, secret, rotated } = input;
  // Created, this page is the POST's answer at WEBHOOKS_PATH: a link there with only a #fragment
  // would just scroll this page, not load the list.
  const back = rotated ? `${WEBHOOKS_PATH}#${endpoint.id}` : WEBHOOKS_PATH;
  return webhooksSection(
    frame,
    rotated ? "New signing secret" : "Endpoint created",
    html`<p class="breadcrumb"><a href="${WEBHOOKS_PATH}">Webhooks</a></p>
<h1>${rotated ? "New signing secret" : "Endpoint created"}</h1>
<div class="warning secret-warning">
  <p><strong>Copy the signing secret now and store it in your receiver's configuration.</strong> It is shown only on this page and will not be shown again. If it is lost, rotate the secret to get a new one.</p>
</div>
${
  rotated
    ? html`<p class="notice" role="status">For the next 24 hours every delivery carries two signatures, one by the old secret and one by this one, so your receiver can switch without missing an event.</p>`
    : ""
}
<section class="card stack section-card" aria-labelledby="endpoint-secret-title">
  <h2 id="endpoint-secret-title">Signing secret</h2>
  <div class="credential">
    <p class="credential-label">URL</p>
    <p class="mono">${endpoint.url}</p>
  </div>
  <div class="credential">
    <p class="credential-label">Endpoint ID</p>
    <p><code id="endpoint-id">${endpoint.id}</code></p>
  </div>
  <div class="credential">
    <p class="credential-label" id="endpoint-secret-label">Secret (shown once)</p>
    <div class="secret"><code id="endpoint-secret" aria-labelledby="endpoint-secret-label">${secret}</code><button type="button" class="button subtle copy" data-copy="#endpoint-secret" aria-describedby="endpoint-secret-label">Copy</button></div>
  </div>
  <p class="hint">Verify each delivery's <code>webhook-signature</code> header with it (Standard Webhooks), for example with the SDK's <code>client.webhooks.verify(rawBody, headers, secret)</code>.</p>
</section>
<p><a class="button primary" href="${back}">I have stored the secret: back to webhooks</a></p>`,
  );
}

/** Asked before deleting; the page works without JavaScript. */
export function deleteConfirmPage(frame: Frame, endpoint: Endpoint): Html {
  return webhooksSection(
    frame,
    "Delete endpoint",
    html`<p class="breadcrumb"><a href="${WEBHOOKS_PATH}">Webhooks</a></p>
<h1>Delete this endpoint?</h1>
<div class="card stack">
  <dl class="facts">
    <div><dt>URL</dt><dd class="mono">${endpoint.url}</dd></div>
    <div><dt>Endpoint ID</dt><dd><code>${endpoint.id}</code></dd></div>
    <div><dt>Pending events</dt><dd>${endpoint.delivery.pending.toLocaleString("en-US")}</dd></div>
  </dl>
  <div class="warning"><p><strong>Deleting is permanent.</strong> Nothing more is posted to this URL, including the events still pending. To stop for a while instead, disable it.</p></div>
  ${confirmForm(frame.csrf, endpointPath(endpoint.id, "delete"), "Delete endpoint", WEBHOOKS_PATH)}
</div>`,
  );
}
