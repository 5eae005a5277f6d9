import { ApiError } from "../http/errors.ts";
import { randomBase62 } from "../ids.ts";
import type { TemplateRequest } from "../messages/template-binding.ts";
import type { SenderRow } from "../senders/repository.ts";
import { storedComponents, type TemplateRow } from "../templates/repository.ts";
import { headerText, templateButtons } from "../templates/variables.ts";
import type { ConversationState } from "./conversation-data.ts";
import { CONVERSATIONS_PATH, conversationPath } from "./conversation-views.ts";
import { type Html, html } from "./html.ts";
import { csrfInput, relativeTime } from "./layout.ts";
import { highlightVariables } from "./template-view.ts";
import { field } from "./web.ts";

/**
 * The reply box of a conversation: free text while the 24-hour window is open, otherwise a picker
 * of the sender's approved templates with one input per variable, and no form at all for a customer
 * who opted out. The form only collects what the API's send request takes; deciding (opt-out,
 * window, quota, variables) is the API's acceptance path.
 */

export const IDEMPOTENCY_FIELD = "idempotency_key";
const IDEMPOTENCY_FORMAT = /^panel-[0-9A-Za-z]{16,64}$/;
/** What WhatsApp takes in one text message (the API checks it too, by code points). */
export const REPLY_MAX_CHARS = 4096;

/** A fresh key per rendered form: posting the same form twice sends once (SPEC §4 Idempotency-Key). */
export function newIdempotencyKey(): string {
  return `panel-${randomBase62(22)}`;
}

export interface ReplyValues {
  idempotencyKey: string;
  /** Which form was posted (the page may be older than the window's state). */
  kind: "text" | "template";
  body: string;
  templateId: string;
  /** Template variable inputs by field name (`header.1`, `body.2`, `buttons.0`). */
  variables: Record<string, string>;
  /** A new conversation's phone number, as typed. */
  to: string;
  error?: { message: string; param: string | null };
}

export function emptyReplyValues(templateId = ""): ReplyValues {
  return { idempotencyKey: newIdempotencyKey(), kind: "text", body: "", templateId, variables: {}, to: "" };
}

/** A posted reply form, as values to send and to show again if the send is refused. */
export function readReplyForm(form: Record<string, string | string[]>): ReplyValues {
  const key = field(form, IDEMPOTENCY_FIELD);
  const variables: Record<string, string> = {};
  for (const name of Object.keys(form)) {
    if (/^(header|body|buttons)\.[A-Za-z0-9_]{1,64}$/.test(name)) variables[name] = field(form, name);
  }
  return {
    // A form without a usable key still sends (once per post): the key only guards repeats.
    idempotencyKey: IDEMPOTENCY_FORMAT.test(key) ? key : newIdempotencyKey(),
    kind: field(form, "kind") === "template" ? "template" : "text",
    body: field(form, "body"),
    templateId: field(form, "template"),
    variables,
    to: field(form, "to").slice(0, 64),
  };
}

/*
 * A template row stores what its components imply (src/senders/template-sync.ts): `variables`
 * (templateVariables), `preview` (the body text) and `header_format`. Those are read here; the header
 * text, footer and buttons only the components hold.
 */

/** Media headers need a file the panel cannot attach: such templates are sent through the API. */
export function needsMediaHandle(template: TemplateRow): boolean {
  const format = template.header_format;
  return format === "IMAGE" || format === "VIDEO" || format === "DOCUMENT";
}

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

function templatePreview(template: TemplateRow, values: Record<string, string>): Html {
  const components = storedComponents(template);
  const header = headerText(components);
  const footer = components.find((c) => c.type === "FOOTER");
  const buttons = templateButtons(components);
  return html`<figure class="reply-template-preview" id="template-preview">
<figcaption>Preview <span class="muted">(fills in as you type)</span></figcaption>
${header ? html`<p class="template-header">${fillPlaceholders(header, (name) => `header.${name}`, values)}</p>` : ""}
<p class="template-body">${fillPlaceholders(template.preview, (name) => `body.${name}`, values)}</p>
${footer && "text" in footer ? html`<p class="template-footer muted">${footer.text}</p>` : ""}
${buttons.length > 0 ? html`<ul class="template-buttons">${buttons.map((b, index) => html`<li>${b.text}${b.type === "URL" ? html` → ${fillPlaceholders(b.url, () => `buttons.${index}`, values)}` : ""}</li>`)}</ul>` : ""}
</figure>`;
}
function templateLabel(template: TemplateRow): string {
  return `${template.name} (${template.language}) · ${template.category.toLowerCase()}`;
}

/** Which input an API error's `param` points at, to mark it invalid. */
function fieldForParam(param: string | null, template: TemplateRow | undefined): string | undefined {
  if (!param) return undefined;
  if (param === "body") return "body";
  if (param === "to") return "to";
  if (param === "template.name" || param === "template.language") return "template";
  if (!template) return undefined;
  const { variables } = template;
  if (param === "template.header") return variables.header[0] ? `header.${variables.header[0]}` : undefined;
  const body = /^template\.variables\.body(?:\.(.+))?$/.exec(param);
  if (body) return `body.${body[1] ?? variables.body[0]}`;
  const button = /^template\.buttons(?:\.(.+))?$/.exec(param);
  if (button) return `buttons.${button[1] ?? variables.buttons[0]}`;
  return undefined;
}

export interface ReplyView {
  contactId: string;
  contactName: string;
  csrf: string;
  state: ConversationState;
  /** The sender's approved templates (offered whatever the window's state). */
  templates: TemplateRow[];
  now: Date;
}

function describedBy(ids: (string | undefined)[]): Html {
  const present = ids.filter((id) => id !== undefined);
  return present.length > 0 ? html` aria-describedby="${present.join(" ")}"` : html``;
}

/**
 * The variables fieldset (`#template-fields`): swapped alone when the picker changes (htmx). Its
 * preview fills in as the variables are typed (panel.js).
 */
export function renderTemplateFields(templates: TemplateRow[], values: ReplyValues): Html {
  const template = templates.find((t) => t.id === values.templateId && !needsMediaHandle(t));
  if (!template) {
    return html`<fieldset id="template-fields" class="template-fields">
<legend>Variables</legend>
<p class="hint">Choose a template above to see its text and fill in its variables.</p>
</fieldset>`;
  }
  const invalid = fieldForParam(values.error?.param ?? null, template);
  const fields = variableFields(template);
  return html`<fieldset id="template-fields" class="template-fields">
<legend>${template.name} <span class="muted">(${template.language})</span></legend>
<input type="hidden" name="template" value="${template.id}">
${templatePreview(template, values.variables)}
${fields.length === 0 ? html`<p class="hint">This template has no variables: it is sent as shown.</p>` : ""}
${fields.map(
  (f) => html`<div class="field">
<label for="${f.id}">${f.label}</label>
<input type="text" id="${f.id}" name="${f.name}" value="${values.variables[f.name] ?? ""}" required maxlength="1024" autocomplete="off" data-preview-var${describedBy([f.hint ? `${f.id}-hint` : undefined, invalid === f.name ? "reply-error" : undefined])}${invalid === f.name ? html` aria-invalid="true"` : ""}>
${f.hint ? html`<p class="hint" id="${f.id}-hint">${f.hint}</p>` : ""}
</div>`,
)}
</fieldset>`;
}

function errorNotice(values: ReplyValues): Html {
  return values.error
    ? html`<p class="error" id="reply-error" role="alert">${values.error.message}</p>`
    : html``;
}

/** The posted form keeps its key (a refusal does not use it up); the other form gets a new one. */
function keyFor(values: ReplyValues, kind: "text" | "template"): string {
  return values.kind === kind ? values.idempotencyKey : newIdempotencyKey();
}

function hiddenFields(csrf: string, key: string, kind: "text" | "template"): Html {
  return html`${csrfInput(csrf)}
<input type="hidden" name="${IDEMPOTENCY_FIELD}" value="${key}">
<input type="hidden" name="kind" value="${kind}">`;
}

function formAttributes(view: ReplyView): Html {
  const action = `${conversationPath(view.contactId)}/messages`;
  return html`method="post" action="${action}" hx-post="${action}" hx-target="#reply" hx-swap="outerHTML"`;
}

function fromHint(state: ConversationState): Html | "" {
  const sender = state.sender;
  return sender
    ? html`<p class="hint reply-from">From ${sender.name ? html`${sender.name} (${sender.phone_number})` : sender.phone_number}</p>`
    : "";
}

export type ReplyFocus = "text" | "template";

/**
 * The free-text part of the reply box (`#reply-text`): the text form while the window is open, the
 * reason there is none while it is closed. When the window opens or closes, a poll replaces this
 * part alone (`oob`): the template part, and whatever is typed and focused in it, stays.
 */
export function renderReplyText(
  view: ReplyView,
  values: ReplyValues,
  options: { autofocus?: boolean; oob?: boolean } = {},
): Html {
  const oob = options.oob ? html` hx-swap-oob="true"` : "";
  if (view.state.mode !== "text") {
    return html`<div id="reply-text" class="reply-text"${oob}>
<p class="warning reply-closed">The 24-hour window is closed: ${
      view.state.contact.last_inbound_at
        ? `${view.contactName} last wrote ${relativeTime(view.state.contact.last_inbound_at, view.now)}`
        : `${view.contactName} has not written yet`
    }. Only an approved template can be sent until they write again.</p>
</div>`;
  }
  const invalid = values.error?.param === "body";
  const mine = values.kind === "text";
  return html`<div id="reply-text" class="reply-text"${oob}>
<form id="reply-form" class="stack" ${formAttributes(view)}>
${hiddenFields(view.csrf, keyFor(values, "text"), "text")}
<div class="field">
<label for="reply-body">Message to ${view.contactName}</label>
<textarea id="reply-body" name="body" rows="3" required maxlength="${REPLY_MAX_CHARS}" aria-describedby="reply-body-hint${mine && values.error ? " reply-error" : ""}"${invalid ? html` aria-invalid="true"` : ""}${options.autofocus ? html` autofocus` : ""}>${values.body}</textarea>
<p class="hint" id="reply-body-hint">Free text, up to 4,096 characters, while the 24-hour window is open.</p>
</div>
<div class="reply-actions">
${fromHint(view.state)}
<button type="submit" id="reply-send" class="button primary">Send</button>
</div>
</form>
</div>`;
}

/**
 * A template picker: a GET form (so it works without a script: "Choose" reloads the page with
 * `?template=`), which with htmx swaps only the variables fieldset when the choice changes.
 */
function templatePicker(input: {
  path: string;
  hidden?: Record<string, string>;
  templates: TemplateRow[];
  selected: string;
  invalid: boolean;
  anchor: string;
  autofocus?: boolean;
}): Html {
  return html`<form id="template-picker" class="field template-picker" method="get" action="${input.path}#${input.anchor}">
${Object.entries(input.hidden ?? {}).map(([name, value]) => html`<input type="hidden" class="picker-context" name="${name}" value="${value}">`)}
<label for="reply-template">Template</label>
<div class="row">
<select id="reply-template" name="template" hx-get="${input.path}" hx-target="#template-fields" hx-swap="outerHTML" hx-trigger="change" hx-sync="this:replace"${input.hidden ? html` hx-include="#template-picker .picker-context"` : ""}${input.invalid ? html` aria-invalid="true"` : ""}${input.autofocus ? html` autofocus` : ""}>
<option value=""${input.selected === "" ? html` selected` : ""}>Choose a template…</option>
${input.templates.map((t) => html`<option value="${t.id}"${t.id === input.selected ? html` selected` : ""}>${templateLabel(t)}</option>`)}
</select>
<button type="submit" id="template-choose" class="button">Choose</button>
</div>
</form>`;
}

function unavailableTemplates(templates: TemplateRow[]): Html | "" {
  const unavailable = templates.filter(needsMediaHandle);
  return unavailable.length > 0
    ? html`<div class="template-unavailable">
<h3>Not available here</h3>
<p class="hint">These templates have a media header: send them with a media handle through the API (<code>POST /v2/media</code>, then <code>template.header.media</code>).</p>
<ul class="unavailable-list">${unavailable.map((t) => html`<li>${templateLabel(t)} <span class="badge">${t.header_format?.toLowerCase()} header</span></li>`)}</ul>
</div>`
    : "";
}

/**
 * The template part of the reply box (`#reply-template-part`): offered whether the window is open or
 * closed (a template can always be sent). A window that opens or closes does not replace it.
 */
function renderReplyTemplates(view: ReplyView, values: ReplyValues, autofocus: boolean): Html {
  const usable = view.templates.filter((t) => !needsMediaHandle(t));
  const selected = usable.some((t) => t.id === values.templateId) ? values.templateId : "";
  const mine = values.kind === "template";
  const shown: ReplyValues = mine ? values : { ...values, variables: {}, error: undefined };
  return html`<div id="reply-template-part" class="reply-template-part">
<h3 id="reply-template-title">${view.state.mode === "text" ? "Or send a template" : "Send a template"}</h3>
${
  usable.length === 0
    ? html`<p class="warning">This number has no approved template that can be sent from here.</p>`
    : html`${templatePicker({
        path: conversationPath(view.contactId),
        templates: usable,
        selected,
        invalid: mine && fieldForParam(values.error?.param ?? null, undefined) === "template",
        anchor: "reply",
        autofocus,
      })}
<form id="reply-template-form" class="stack" ${formAttributes(view)}>
${hiddenFields(view.csrf, keyFor(values, "template"), "template")}
${renderTemplateFields(usable, { ...shown, templateId: selected })}
<div class="reply-actions">
${fromHint(view.state)}
<button type="submit" id="reply-template-send" class="button primary">Send template</button>
</div>
</form>`
}
${unavailableTemplates(view.templates)}
</div>`;
}

/**
 * The reply section (`#reply`). `autofocus` after a successful htmx send (the user asked for the
 * box by sending): the part they sent from. `oob` when a poll replaces it all (a reply became
 * possible or impossible: opt-out, an inactive number).
 */
export function renderReply(
  view: ReplyView,
  values: ReplyValues,
  options: { autofocus?: ReplyFocus; oob?: boolean } = {},
): Html {
  const { state } = view;
  const sender = state.sender;
  const oob = options.oob ? html` hx-swap-oob="true"` : "";

  if (state.mode === "opted_out") {
    const since = state.contact.opted_out_at;
    return html`<section id="reply" class="card reply" aria-labelledby="reply-title"${oob}>
<h2 id="reply-title">Reply</h2>
${errorNotice(values)}
<p class="warning reply-opted-out">${view.contactName} opted out of messages${since ? ` ${relativeTime(since, view.now)}` : ""}: nothing can be sent to them, from here or through the API, until they write START again.</p>
</section>`;
  }

  if (state.mode === "none") {
    return html`<section id="reply" class="card reply" aria-labelledby="reply-title"${oob}>
<h2 id="reply-title">Reply</h2>
${errorNotice(values)}
<p class="warning">${
      sender
        ? html`The number this conversation uses (${sender.phone_number}) is not active, so no reply can be sent from here.`
        : "This account has no active number to reply from."
    }</p>
</section>`;
  }

  return html`<section id="reply" class="card reply" aria-labelledby="reply-title"${oob}>
<h2 id="reply-title">Reply</h2>
${errorNotice(values)}
${renderReplyText(view, values, { autofocus: options.autofocus === "text" })}
${renderReplyTemplates(view, values, options.autofocus === "template")}
</section>`;
}

/** What the new-conversation page shows: the tenant's active numbers, the chosen one's templates. */
export interface NewConversationView {
  csrf: string;
  senders: SenderRow[];
  sender: SenderRow | undefined;
  templates: TemplateRow[];
}

export const NEW_CONVERSATION_PATH = `${CONVERSATIONS_PATH}/new`;

/**
 * Start a conversation (issue 24): a phone number and an approved template (a first message to a
 * customer must be a template), sent through the same path as a reply. The number to send from is
 * a choice only when the tenant has more than one active number.
 */
export function renderNewConversation(view: NewConversationView, values: ReplyValues): Html {
  const { sender } = view;
  if (!sender) {
    return html`<section id="new-conversation" class="card" aria-labelledby="new-conversation-title">
<h2 id="new-conversation-title">Send a template</h2>
<p class="warning">This account has no active number to send from.</p>
</section>`;
  }
  const usable = view.templates.filter((t) => !needsMediaHandle(t));
  const selected = usable.some((t) => t.id === values.templateId) ? values.templateId : "";
  const invalid = fieldForParam(values.error?.param ?? null, undefined);
  const path = `${NEW_CONVERSATION_PATH}?sender=${encodeURIComponent(sender.id)}`;
  return html`<section id="new-conversation" class="card reply" aria-labelledby="new-conversation-title">
<h2 id="new-conversation-title">Send a template</h2>
${errorNotice(values)}
${
  view.senders.length > 1
    ? html`<form id="sender-picker" class="field template-picker" method="get" action="${NEW_CONVERSATION_PATH}">
<label for="new-sender">From</label>
<div class="row">
<select id="new-sender" name="sender">
${view.senders.map((s) => html`<option value="${s.id}"${s.id === sender.id ? html` selected` : ""}>${s.name ? `${s.name} (${s.phone_number})` : s.phone_number}</option>`)}
</select>
<button type="submit" id="sender-choose" class="button">Use this number</button>
</div>
</form>`
    : ""
}
${
  usable.length === 0
    ? html`<p class="warning">This number has no approved template that can be sent from here.</p>`
    : html`${templatePicker({
        path: NEW_CONVERSATION_PATH,
        hidden: { sender: sender.id },
        templates: usable,
        selected,
        invalid: invalid === "template",
        anchor: "new-conversation",
      })}
<form id="new-conversation-form" class="stack" method="post" action="${path}">
${hiddenFields(view.csrf, values.idempotencyKey, "template")}
<input type="hidden" name="sender" value="${sender.id}">
<div class="field">
<label for="new-to">Phone number</label>
<input type="tel" id="new-to" name="to" value="${values.to}" required maxlength="64" autocomplete="off" inputmode="tel" aria-describedby="new-to-hint${invalid === "to" ? " reply-error" : ""}"${invalid === "to" ? html` aria-invalid="true"` : ""}>
<p class="hint" id="new-to-hint">With the country code, like +4915123456789. If you already have a conversation with this number, the message joins it.</p>
</div>
${renderTemplateFields(usable, { ...values, templateId: selected })}
<div class="reply-actions">
<p class="hint reply-from">From ${sender.name ? html`${sender.name} (${sender.phone_number})` : sender.phone_number}</p>
<button type="submit" id="new-conversation-send" class="button primary">Send template</button>
</div>
</form>`
}
${unavailableTemplates(view.templates)}
</section>`;
}

/** The body of the API send request for the posted values (problems the panel can name itself). */
export function sendRequestOf(
  values: ReplyValues,
  templates: TemplateRow[],
): { body: string } | { template: TemplateRequest } {
  if (values.kind === "text") {
    if (values.body.trim() === "") {
      throw new ApiError("parameter_missing", "Write a message before sending.", { param: "body" });
    }
    return { body: values.body };
  }
  const template = templates.find((t) => t.id === values.templateId);
  if (!template) {
    throw new ApiError(
      "template_not_found",
      values.templateId ? "That template is no longer approved; choose another." : "Choose a template first.",
      { param: "template.name" },
    );
  }
  if (needsMediaHandle(template)) {
    throw new ApiError(
      "parameter_invalid",
      "This template has a media header: send it with a media handle through the API.",
      { param: "template.header" },
    );
  }
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
  if (variables.header[0] !== undefined) request.header = values.variables[`header.${variables.header[0]}`];
  if (variables.buttons.length > 0) request.buttons = pick("buttons", variables.buttons);
  return { template: request };
}
