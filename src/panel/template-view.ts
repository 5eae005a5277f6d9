import { escapeHtml, type Html, unsafeRaw } from "./html.ts";

/** What the Senders page and the conversation reply box share when they show a template's text. */

const PLACEHOLDER = /\{\{([A-Za-z0-9_]+)\}\}/g;

/**
 * Template text with its `{{n}}` / `{{name}}` variables marked. The text is escaped first and the
 * marks are added to the escaped text: escaping leaves braces and [A-Za-z0-9_] as they are, so the
 * pattern finds the same variables, and nothing of the text itself can become markup.
 */
export function highlightVariables(text: string): Html {
  return unsafeRaw(escapeHtml(text).replace(PLACEHOLDER, '<mark class="var">{{$1}}</mark>'));
}

/** Graph's `rejected_reason` values in words; another value is shown as the provider wrote it. */
const REJECTION_REASONS: Record<string, string> = {
  INVALID_FORMAT: "invalid format (for example a malformed variable or a missing example)",
  ABUSIVE_CONTENT: "abusive content",
  PROMOTIONAL: "promotional content in a template that is not a marketing one",
  TAG_CONTENT_MISMATCH: "the content does not match the category",
  INCORRECT_CATEGORY: "the wrong category",
  SCAM: "suspected scam",
};

/** Why the provider rejected a template, for people, with the provider's own code beside it. */
export function rejectionReason(reason: string): Html {
  const words = REJECTION_REASONS[reason];
  return words
    ? unsafeRaw(`${escapeHtml(words)} <code>${escapeHtml(reason)}</code>`)
    : unsafeRaw(`<code>${escapeHtml(reason)}</code>`);
}
