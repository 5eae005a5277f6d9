import { ApiError } from "../http/errors.ts";
import { publicHttpsUrlProblem } from "../lib/public-url.ts";
import type { TemplateRequest } from "../messages/template-binding.ts";
import { storedComponents, type TemplateRow } from "../templates/repository.ts";
import { headerText, templateButtons } from "../templates/variables.ts";
import { type Html, html } from "./html.ts";
import { mediaIcon } from "./icons.ts";
import { highlightVariables } from "./template-view.ts";
import { field } from "./web.ts";

/**
 * A template's part of a send form (a conversation's reply box, the new-conversation page): the
 * fieldset with one input per variable and, for an IMAGE, VIDEO or DOCUMENT header, the link of its
 * media; the live preview; and the send request's `template` from what was posted. Deciding
 * (variables, the link's address, window, quota) is still the API's acceptance path: the panel only
 * names the problems it can name in its own words first.
 */

export type MediaKind = "image" | "video" | "document";

/** What a template form posts, besides which form it is. */
export interface TemplateValues {
  templateId: string;
  /** Template variable inputs by field name (`header.1`, `body.2`, `buttons.0`). */
  variables: Record<string, string>;
  /** A media header's link, as typed. */
  headerLink: string;
  /** A document header's file name as the customer sees it (optional), as typed. */
  headerFilename: string;
  error?: { message: string; param: string | null };
}

const HEADER_LINK_FIELD = "header_link";
const HEADER_FILENAME_FIELD = "header_filename";
/** The API's limits on `template.header.link` and `.filename` (src/messages/schemas.ts). */
const LINK_MAX_CHARS = 2048;
const FILENAME_MAX_CHARS = 255;

/** The template part of a posted form. */
export function readTemplateValues(form: Record<string, string | string[]>): TemplateValues {
  const variables: Record<string, string> = {};
  for (const name of Object.keys(form)) {
    if (/^(header|body|buttons)\.[A-Za-z0-9_]{1,64}$/.test(name)) variables[name] = field(form, name);
  }
  return {
    templateId: field(form, "template"),
    variables,
    headerLink: [...field(form, HEADER_LINK_FIELD)].slice(0, LINK_MAX_CHARS).join(""),
    headerFilename: [...field(form, HEADER_FILENAME_FIELD)].slice(0, FILENAME_MAX_CHARS).join(""),
  };
}

/** The media an IMAGE, VIDEO or DOCUMENT header shows; undefined for a text header or none. */
export function mediaHeaderKind(template: TemplateRow): MediaKind | undefined {
  const format = template.header_format;
  return format === "IMAGE"
    ? "image"
    : format === "VIDEO"
      ? "video"
      : format === "DOCUMENT"
        ? "document"
        : undefined;
}

const MEDIA_WORDS: Record<MediaKind, { label: string; hint: string; example: string }> = {
  image: {
    label: "Image",
    hint: "A JPEG or PNG picture of at most 5 MB",
    example: "https://example.com/photo.jpg",
  },
  video: {
    label: "Video",
    hint: "An MP4 or 3GPP video of at most 16 MB",
    example: "https://example.com/clip.mp4",
  },
  document: { label: "Document", hint: "A file such as a PDF", example: "https://example.com/invoice.pdf" },
};

/*
 * A template row stores what its components imply (src/senders/template-sync.ts): `variables`
 * (templateVariables), `preview` (the body text) and `header_format`. Those are read here; the header
 * text, footer and buttons only the components hold.
 */

interface VariableField {
  name: string;
  id: string;
  label: Html;
  hint?: Html;
}

/** One input per variable, in the order the customer reads them: header, body, buttons. */
function variableFields(template: TemplateRow): VariableField[] {
  const { variables } = template;
  const components = storedComponents(template);
  const buttons = templateButtons(components);
  const header = headerText(components);
  return [
    ...variables.header.map((name) => ({
      name: `header.${name}`,
      id: `reply-var-header-${name}`,
      label: html`Header <mark class="var">{{${name}}}</mark>`,
      hint: header ? html`In: ${highlightVariables(header)}` : undefined,
    })),
    ...variables.body.map((name) => ({
      name: `body.${name}`,
      id: `reply-var-body-${name}`,
      label: html`Body <mark class="var">{{${name}}}</mark>`,
    })),
    ...variables.buttons.map((index) => {
      const button = buttons[Number(index)];
      return {
        name: `buttons.${index}`,
        id: `reply-var-buttons-${index}`,
        label: html`Button “${button?.text ?? `#${Number(index) + 1}`}” link`,
        hint: button && button.type === "URL" ? html`In: ${highlightVariables(button.url)}` : undefined,
      };
    }),
  ];
}

const PLACEHOLDER = /\{\{([A-Za-z0-9_]+)\}\}/g;

/**
 * Template text with each `{{n}}` as a mark that names its input (`data-var`): the value typed so
 * far, or the placeholder while the input is empty. panel.js fills the marks as values are typed
 * (the live preview); the server fills them when it draws the form again with values.
 */
function fillPlaceholders(
  text: string,
  fieldOf: (name: string) => string,
  values: Record<string, string>,
): Html {
  const parts: Html[] = [];
  let last = 0;
  for (const match of text.matchAll(PLACEHOLDER)) {
    const index = match.index ?? 0;
    const name = fieldOf(match[1] ?? "");
    const value = values[name] ?? "";
    parts.push(
      html`${text.slice(last, index)}<mark class="var${value.trim() ? " filled" : ""}" data-var="${name}" data-placeholder="${match[0]}">${value.trim() ? value : match[0]}</mark>`,
    );
    last = index + match[0].length;
  }
  parts.push(html`${text.slice(last)}`);
  return html`${parts}`;
}

/**
 * A media header in the preview: its kind, and once the link is typed the file's name and host
 * with a link to open it (panel.js fills it from the inputs; the panel's CSP loads no image from
 * another site, so the file itself is checked by opening it).
 */
function mediaPreview(kind: MediaKind): Html {
  const words = MEDIA_WORDS[kind];
  return html`<p class="template-header template-media" data-media-preview="${kind}">${mediaIcon(kind)} <span class="template-media-text" data-label="${words.label}">${words.label}: add its link below</span> <a class="template-media-open" target="_blank" rel="noopener noreferrer" hidden>Open the link<span class="visually-hidden"> in a new tab</span></a></p>`;
}

function templatePreview(template: TemplateRow, values: Record<string, string>): Html {
  const components = storedComponents(template);
  const header = headerText(components);
  const media = mediaHeaderKind(template);
  const footer = components.find((c) => c.type === "FOOTER");
  const buttons = templateButtons(components);
  return html`<figure class="reply-template-preview" id="template-preview">
<figcaption>Preview <span class="muted">(fills in as you type)</span></figcaption>
${media ? mediaPreview(media) : ""}
${header ? html`<p class="template-header">${fillPlaceholders(header, (name) => `header.${name}`, values)}</p>` : ""}
<p class="template-body">${fillPlaceholders(template.preview, (name) => `body.${name}`, values)}</p>
${footer && "text" in footer ? html`<p class="template-footer muted">${footer.text}</p>` : ""}
${buttons.length > 0 ? html`<ul class="template-buttons">${buttons.map((b, index) => html`<li>${b.text}${b.type === "URL" ? html` → ${fillPlaceholders(b.url, () => `buttons.${index}`, values)}` : ""}</li>`)}</ul>` : ""}
</figure>`;
}

/** Which input an API error's `param` points at, to mark it invalid. */
export function fieldForParam(param: string | null, template: TemplateRow | undefined): string | undefined {
  if (!param) return undefined;
  if (param === "body") return "body";
  if (param === "to") return "to";
  if (param === "template.name" || param === "template.language") return "template";
  if (!template) return undefined;
  const { variables } = template;
  if (param === "template.header" || param.startsWith("template.header.")) {
    if (mediaHeaderKind(template)) return HEADER_LINK_FIELD;
    return variables.header[0] ? `header.${variables.header[0]}` : undefined;
  }
  const body = /^template\.variables\.body(?:\.(.+))?$/.exec(param);
  if (body) return `body.${body[1] ?? variables.body[0]}`;
  const button = /^template\.buttons(?:\.(.+))?$/.exec(param);
  if (button) return `buttons.${button[1] ?? variables.buttons[0]}`;
  return undefined;
}

function describedBy(ids: (string | undefined)[]): Html {
  const present = ids.filter((id) => id !== undefined);
  return present.length > 0 ? html` aria-describedby="${present.join(" ")}"` : html``;
}

function invalidMark(invalid: boolean): Html | "" {
  return invalid ? html` aria-invalid="true"` : "";
}

/**
 * A media header's inputs: its link (an https URL: the browser checks the form, the panel and then
 * the API check the address) and, for a document, the file name the customer sees.
 */
function mediaFields(kind: MediaKind, values: TemplateValues, invalid: string | undefined): Html {
  const words = MEDIA_WORDS[kind];
  const wrong = invalid === HEADER_LINK_FIELD;
  return html`<div class="field">
<label for="reply-header-link">${words.label} link <span class="muted">(the header)</span></label>
<input type="url" id="reply-header-link" name="${HEADER_LINK_FIELD}" value="${values.headerLink}" required maxlength="${LINK_MAX_CHARS}" pattern="https://.+" title="A link that starts with https://" placeholder="${words.example}" autocomplete="off" spellcheck="false" data-preview-media${describedBy(["reply-header-link-hint", wrong ? "reply-error" : undefined])}${invalidMark(wrong)}>
<p class="hint" id="reply-header-link-hint">${words.hint}, at a public https address: WhatsApp fetches it when the message is sent.</p>
</div>
${
  kind === "document"
    ? html`<div class="field">
<label for="reply-header-filename">File name <span class="muted">(optional)</span></label>
<input type="text" id="reply-header-filename" name="${HEADER_FILENAME_FIELD}" value="${values.headerFilename}" maxlength="${FILENAME_MAX_CHARS}" autocomplete="off" data-preview-media aria-describedby="reply-header-filename-hint">
<p class="hint" id="reply-header-filename-hint">What the customer sees the document called, like Invoice 2041.pdf.</p>
</div>`
    : ""
}`;
}

/**
 * The variables fieldset (`#template-fields`): swapped alone when the picker changes (htmx). Its
 * preview fills in as the variables are typed (panel.js).
 */
export function renderTemplateFields(templates: TemplateRow[], values: TemplateValues): Html {
  const template = templates.find((t) => t.id === values.templateId);
  if (!template) {
    return html`<fieldset id="template-fields" class="template-fields">
<legend>Variables</legend>
<p class="hint">Choose a template above to see its text and fill in its variables.</p>
</fieldset>`;
  }
  const invalid = fieldForParam(values.error?.param ?? null, template);
  const fields = variableFields(template);
  const media = mediaHeaderKind(template);
  return html`<fieldset id="template-fields" class="template-fields">
<legend>${template.name} <span class="muted">(${template.language})</span></legend>
<input type="hidden" name="template" value="${template.id}">
${templatePreview(template, values.variables)}
${media ? mediaFields(media, values, invalid) : ""}
${fields.length === 0 && !media ? html`<p class="hint">This template has no variables: it is sent as shown.</p>` : ""}
${fields.map(
  (f) => html`<div class="field">
<label for="${f.id}">${f.label}</label>
<input type="text" id="${f.id}" name="${f.name}" value="${values.variables[f.name] ?? ""}" required maxlength="1024" autocomplete="off" data-preview-var${describedBy([f.hint ? `${f.id}-hint` : undefined, invalid === f.name ? "reply-error" : undefined])}${invalidMark(invalid === f.name)}>
${f.hint ? html`<p class="hint" id="${f.id}-hint">${f.hint}</p>` : ""}
</div>`,
)}
</fieldset>`;
}

/** The media header of the send request: the link as typed, checked as the API checks it. */
function mediaHeaderOf(kind: MediaKind, values: TemplateValues): NonNullable<TemplateRequest["header"]> {
  const label = MEDIA_WORDS[kind].label;
  const link = values.headerLink.trim();
  if (link === "") {
    throw new ApiError("parameter_missing", `Give the link of the ${kind} the template's header shows.`, {
      param: "template.header.link",
    });
  }
  const problem = publicHttpsUrlProblem(link);
  if (problem) {
    throw new ApiError(
      "parameter_invalid",
      `The ${label.toLowerCase()} link ${problem}: give a public https link, like ${MEDIA_WORDS[kind].example}.`,
      { param: "template.header.link" },
    );
  }
  const filename = values.headerFilename.trim();
  return { type: kind, link, ...(kind === "document" && filename !== "" ? { filename } : {}) };
}

/** The send request's `template` for the posted values (problems the panel can name itself). */
export function templateRequestOf(template: TemplateRow, values: TemplateValues): TemplateRequest {
  const media = mediaHeaderKind(template);
  const header = media ? mediaHeaderOf(media, values) : undefined;
  for (const f of variableFields(template)) {
    if ((values.variables[f.name] ?? "").trim() === "") {
      const param = f.name.startsWith("body.")
        ? `template.variables.${f.name}`
        : f.name.startsWith("header.")
          ? "template.header"
          : `template.${f.name}`;
      throw new ApiError("parameter_missing", "Fill in every variable of the template.", { param });
    }
  }
  const { variables } = template;
  const pick = (prefix: string, names: string[]) =>
    Object.fromEntries(names.map((name) => [name, values.variables[`${prefix}.${name}`] ?? ""]));
  const request: TemplateRequest = { name: template.name, language: template.language };
  if (variables.body.length > 0) request.variables = { body: pick("body", variables.body) };
  if (header) request.header = header;
  else if (variables.header[0] !== undefined)
    request.header = values.variables[`header.${variables.header[0]}`];
  if (variables.buttons.length > 0) request.buttons = pick("buttons", variables.buttons);
  return request;
}
