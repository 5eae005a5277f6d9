import type { TemplateButton, TemplateComponent } from "../channel/provider.ts";
import type { TemplateVariables } from "../db/schema.ts";

/**
 * What a template asks the sender to fill, derived from the provider's components (DESIGN §3): the
 * body and header placeholders by name, and the URL buttons with a dynamic part by their index.
 * The send path validates `template.variables` / `header` / `buttons` against the same functions.
 */

export type { TemplateVariables };

/** The header kinds WhatsApp knows; null when the template has no header. */
export type HeaderFormat = Extract<TemplateComponent, { type: "HEADER" }>["format"];

// Positional `{{1}}` and named `{{order_id}}` placeholders (WhatsApp allows lower-case names, digits, _).
const PLACEHOLDER = /\{\{([A-Za-z0-9_]+)\}\}/g;

/** Placeholder names of a text in order of first appearance, each once: "Hi {{1}} {{2}} {{1}}" -> ["1","2"]. */
export function placeholderNames(text: string): string[] {
  return [...new Set(Array.from(text.matchAll(PLACEHOLDER), (match) => match[1] ?? ""))];
}

function findComponent<T extends TemplateComponent["type"]>(
  components: readonly TemplateComponent[],
  type: T,
): Extract<TemplateComponent, { type: T }> | undefined {
  return components.find((c): c is Extract<TemplateComponent, { type: T }> => c.type === type);
}

/** The BODY text exactly as written, placeholders included ("" when there is no body). */
export function bodyText(components: readonly TemplateComponent[]): string {
  return findComponent(components, "BODY")?.text ?? "";
}

export function headerFormat(components: readonly TemplateComponent[]): HeaderFormat | null {
  return findComponent(components, "HEADER")?.format ?? null;
}

/** The TEXT header's text with its placeholders; null for media headers or no header. */
export function headerText(components: readonly TemplateComponent[]): string | null {
  const header = findComponent(components, "HEADER");
  return header?.format === "TEXT" ? header.text : null;
}

/** Every button of the template in order; a button's index here is the one sends refer to. */
export function templateButtons(components: readonly TemplateComponent[]): TemplateButton[] {
  return components.flatMap((c) => (c.type === "BUTTONS" ? c.buttons : []));
}

/**
 * Names to fill: body and header placeholders in order of first appearance; for buttons, the index
 * (as a string, as `template.buttons` is keyed) of each URL button whose url has a placeholder.
 */
export function templateVariables(components: readonly TemplateComponent[]): TemplateVariables {
  const header = headerText(components);
  return {
    body: placeholderNames(bodyText(components)),
    header: header === null ? [] : placeholderNames(header),
    buttons: templateButtons(components).flatMap((button, index) =>
      button.type === "URL" && placeholderNames(button.url).length > 0 ? [String(index)] : [],
    ),
  };
}
