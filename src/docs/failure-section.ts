import {
  failureDocAnchor,
  graphCodesOf,
  MESSAGE_FAILURE_CODES,
  MESSAGE_FAILURES,
} from "../channel/failure-codes.ts";
import { API_ERRORS } from "../http/errors.ts";

/** The id of the section's heading (for a table of contents). */
export const FAILURE_SECTION_ID = "failure-codes";

const escapeHtml = (text: string) =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");

/** Inline `code` spans in catalogue prose. */
const prose = (text: string) => escapeHtml(text).replace(/`([^`]+)`/g, "<code>$1</code>");

const ORIGIN: Record<(typeof MESSAGE_FAILURES)[keyof typeof MESSAGE_FAILURES]["origin"], string> = {
  provider: "from WhatsApp",
  gateway: "decided by this service, nothing sent",
  both: "from WhatsApp, or decided by this service",
};

/**
 * The "Message failure codes" part of `{base_url}/docs`: one entry per code of the catalogue
 * (src/channel/failure-codes.ts) at `#failure-<code>`. API error codes keep the bare `#<code>`
 * (`doc_url`), so a code that is both (`recipient_opted_out`, `messaging_window_closed`,
 * `template_not_found`, `parameter_invalid`) has two entries, the failure's linking to the API error's.
 */
export function renderFailureSection(): string {
  const entries = MESSAGE_FAILURE_CODES.map((code) => {
    const entry = MESSAGE_FAILURES[code];
    const anchor = failureDocAnchor(code);
    const graphCodes = graphCodesOf(code);
    const meta = [
      entry.retryable ? "retryable" : "not retryable",
      ORIGIN[entry.origin],
      ...(graphCodes.length > 0 ? [`WhatsApp errors ${graphCodes.join(", ")}`] : []),
    ].join(" · ");
    const alsoApiError =
      code in API_ERRORS
        ? `<p class="meta">Also an API error code: <a href="#${code}">${code}</a> (a request refused at once).</p>`
        : "";
    return `<section id="${anchor}"><h3><a href="#${anchor}">${code}</a> <small>(message failure)</small></h3>
<p class="meta">${escapeHtml(meta)}</p>
<p>${prose(entry.meaning)}</p><p><strong>What to do:</strong> ${prose(entry.action)}</p>${alsoApiError}</section>`;
  }).join("\n");
  return `<h2 id="${FAILURE_SECTION_ID}">Message failure codes</h2>
<p>A message that could not be sent has <code>status: "failed"</code> and
<code>failure: {"code", "message", "retryable"}</code> (on <code>GET /messages/{id}</code>, in history, conversations,
the feed and the <code>message.failed</code> event). While a message is tried again after a failed attempt,
<code>retrying.last_error</code> has the same shape. Branch on <code>code</code>; <code>message</code> is for people.
<code>retryable</code> says whether sending the same message again may succeed: the service itself retries
throttling and temporary faults before it gives up.</p>
${entries}`;
}
