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
