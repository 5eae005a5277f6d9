import { presentRetrying } from "../history/presenter.ts";
import { failureDocLink, localTime } from "./conversation-markup.ts";
import type { MessageDetails, ThreadMessageRow } from "./conversation-messages.ts";
import { type Html, html } from "./html.ts";

/** A message's status: its badge, its retry state, and the timeline of the status steps it went through. */

const STATUS_LABELS: Record<string, { label: string; tone: string }> = {
  scheduled: { label: "Scheduled", tone: "" },
  canceled: { label: "Canceled", tone: "warn" },
  accepted: { label: "Accepted", tone: "" },
  sent: { label: "Sent", tone: "" },
  delivered: { label: "Delivered", tone: "ok" },
  read: { label: "Read", tone: "ok" },
  failed: { label: "Failed", tone: "bad" },
};

export function statusBadge(status: string): Html {
  const known = STATUS_LABELS[status] ?? { label: status, tone: "warn" };
  return html`<span class="badge message-status ${known.tone}" data-status="${status}"><span class="visually-hidden">Status: </span>${known.label}</span>`;
}

/**
 * A message waiting for a retry (sql/020): still `accepted`, with the error of its last attempt.
 * The send record clears `last_error` once the message is sent or fails for good.
 */
export function isRetrying(row: ThreadMessageRow): boolean {
  return presentRetrying(row) !== null;
}

/** "Retrying: 2 attempts so far, next at 14:05. Last error: … What provider_rate_limited means". */
export function retryingLine(row: ThreadMessageRow, now: Date): Html {
  const error = row.last_error!;
  const attempts = row.send_attempts;
  const next = row.send_not_before;
  return html`<p class="message-retrying"><strong>Retrying:</strong> ${attempts} attempt${attempts === 1 ? "" : "s"} so far, next ${
    next && next.getTime() > now.getTime() ? html`at ${localTime(next)}` : "due now"
  }. Last error: ${error.message} ${failureDocLink(error.code)}</p>`;
}

const STEP_LABELS: Record<string, string> = {
  scheduled: "Scheduled",
  accepted: "Accepted",
  sent: "Sent",
  delivered: "Delivered",
  read: "Read",
  failed: "Failed",
  canceled: "Canceled",
};

/**
 * The status timeline (`.message-timeline`): what the details disclosure loads, and the message page
 * shows. Acceptance is the message's own time; the later statuses are the event log's records.
 */
export function renderMessageTimeline(details: MessageDetails, now: Date): Html {
  const { message, steps } = details;
  if (message.direction === "inbound") {
    return html`<div class="message-timeline">
<ol class="timeline"><li><span class="step">Received</span> ${localTime(message.created_at)}</li></ol>
</div>`;
  }
  const items: Html[] = [html`<li><span class="step">Accepted</span> ${localTime(message.created_at)}</li>`];
  if (message.send_at) {
    items.push(html`<li><span class="step">Scheduled for</span> ${localTime(message.send_at)}</li>`);
  }
  for (const step of steps) {
    items.push(
      html`<li${step.status === "failed" ? html` class="failed"` : ""}><span class="step">${STEP_LABELS[step.status] ?? step.status}</span> ${localTime(step.at)}${
        step.failure
          ? html` <span class="step-failure">${step.failure.message} ${failureDocLink(step.failure.code)}</span>`
          : ""
      }</li>`,
    );
  }
  const status = message.status ?? "accepted";
  const recorded = steps.some((step) => step.status === status);
  if (!recorded && status !== "accepted" && status !== "scheduled") {
    // The event log keeps 30 days: older statuses are known only by the message's last change.
    items.push(
      html`<li><span class="step">${STEP_LABELS[status] ?? status}</span> ${localTime(message.updated_at)} <span class="muted">(the message's last change; earlier status times are no longer kept)</span></li>`,
    );
  }
  if (isRetrying(message)) {
    items.push(html`<li class="retrying">${retryingLine(message, now)}</li>`);
  }
  return html`<div class="message-timeline">
<ol class="timeline" aria-label="Status timeline">${items}</ol>
<p class="hint">Times are when this service recorded each status, in your time zone (hover over one for UTC).</p>
</div>`;
}
