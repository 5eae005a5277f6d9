/**
 * HTML from tagged templates. Every interpolated value is escaped unless it is already `Html`
 * (made by this tag or by `unsafeRaw`), so the safe way is the short way. Arrays are joined.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

type Part = Html | string | number | boolean | null | undefined | readonly Part[];

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

function render(part: Part): string {
  if (part instanceof Html) return part.value;
  if (Array.isArray(part)) return part.map(render).join("");
  // false, null and undefined render nothing, so `${cond && html`...`}` reads naturally.
  if (part === null || part === undefined || part === false) return "";
  return escapeHtml(String(part));
}

export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0] ?? "";
  for (let i = 0; i < values.length; i++) out += render(values[i] as Part) + (strings[i + 1] ?? "");
  return new Html(out);
}

/** Trusted markup only (our own constants); never user input. */
export function unsafeRaw(markup: string): Html {
  return new Html(markup);
}
