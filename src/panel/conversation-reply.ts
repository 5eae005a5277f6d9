import { ApiError } from "../http/errors.ts";
import { randomBase62 } from "../ids.ts";
import type { TemplateRequest } from "../messages/template-binding.ts";
import type { TemplateRow } from "../templates/repository.ts";
import type { ConversationState, NewConversationView } from "./conversation-data.ts";
import { CONVERSATIONS_PATH, conversationPath } from "./conversation-markup.ts";
import { type Html, html } from "./html.ts";
import { csrfInput, relativeTime } from "./layout.ts";
import {
  fieldForParam,
  readTemplateValues,
  renderTemplateFields,
  type TemplateValues,
  templateRequestOf,
} from "./template-form.ts";
import { field } from "./web.ts";

/**
 * The reply box of a conversation: free text while the 24-hour window is open (a draft typed there
 * is kept while the window is closed), a picker of the sender's approved templates at any time (their
 * fields: template-form.ts), and no form at all for a customer who opted out. The form only collects
 * what the API's send request takes; deciding (opt-out, window, quota, variables) is the API's
 * acceptance path.
 */

export const IDEMPOTENCY_FIELD = "idempotency_key";
const IDEMPOTENCY_FORMAT = /^panel-[0-9A-Za-z]{16,64}$/;
/** What WhatsApp takes in one text message (the API checks it too, by code points). */
export const REPLY_MAX_CHARS = 4096;

/** A fresh key per rendered form: posting the same form twice sends once (SPEC §4 Idempotency-Key). */
export function newIdempotencyKey(): string {
  return `panel-${randomBase62(22)}`;
}

export interface ReplyValues extends TemplateValues {
  idempotencyKey: string;
  /** Which form was posted (the page may be older than the window's state). */
  kind: "text" | "template";
  body: string;
  /** A new conversation's phone number, as typed. */
  to: string;
}

export function emptyReplyValues(templateId = ""): ReplyValues {
  return {
    idempotencyKey: newIdempotencyKey(),
    kind: "text",
    body: "",
    templateId,
    variables: {},
    headerLink: "",
    headerFilename: "",
    to: "",
  };
}

/** A posted reply form, as values to send and to show again if the send is refused. */
export function readReplyForm(form: Record<string, string | string[]>): ReplyValues {
  const key = field(form, IDEMPOTENCY_FIELD);
  return {
    ...readTemplateValues(form),
    // A form without a usable key still sends (once per post): the key only guards repeats.
    idempotencyKey: IDEMPOTENCY_FORMAT.test(key) ? key : newIdempotencyKey(),
    kind: field(form, "kind") === "template" ? "template" : "text",
    body: field(form, "body"),
    to: field(form, "to").slice(0, 64),
  };
}

function templateLabel(template: TemplateRow): string {
  return `${template.name} (${template.language}) · ${template.category.toLowerCase()}`;
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
 * What was typed in the free-text box and could not be sent because the window closed: kept (and
 * said so) near the templates, to come back in the box once the customer writes again. The server
 * draws it for a text reply refused as the window closed; panel.js keeps the draft of a box a poll
 * removes (per conversation, in sessionStorage), shows it here, and puts it back in the box.
 */
function keptDraft(view: ReplyView, draft: string): Html {
  return html`<div id="reply-draft" class="reply-draft" role="group" tabindex="-1" aria-labelledby="reply-draft-note"${draft ? "" : html` hidden`}>
<p id="reply-draft-note" class="reply-draft-note"><strong>Your message is kept as a draft.</strong> It cannot be sent as free text until ${view.contactName} writes again; then it is back in the message box. Until then, only a template can be sent.</p>
<blockquote id="reply-draft-text" class="reply-draft-text">${draft}</blockquote>
<button type="button" id="reply-draft-discard" class="button subtle" hidden>Discard the draft</button>
</div>`;
}

/**
 * The free-text part of the reply box (`#reply-text`): the text form while the window is open, the
 * reason there is none (and a kept draft) while it is closed. When the window opens or closes, a
 * poll replaces this part alone (`oob`): the template part, and whatever is typed and focused in
 * it, stays. `data-draft-for` names whose draft panel.js keeps.
 */
export function renderReplyText(
  view: ReplyView,
  values: ReplyValues,
  options: { autofocus?: boolean; oob?: boolean } = {},
): Html {
  const oob = options.oob ? html` hx-swap-oob="true"` : "";
  if (view.state.mode !== "text") {
    const draft = values.kind === "text" && values.body.trim() !== "" ? values.body : "";
    return html`<div id="reply-text" class="reply-text" data-draft-for="${view.contactId}"${oob}>
<p id="reply-closed" class="warning reply-closed" tabindex="-1">The 24-hour window is closed: ${
      view.state.contact.last_inbound_at
        ? `${view.contactName} last wrote ${relativeTime(view.state.contact.last_inbound_at, view.now)}`
        : `${view.contactName} has not written yet`
    }. Only an approved template can be sent until they write again.</p>
${keptDraft(view, draft)}
</div>`;
  }
  const invalid = values.error?.param === "body";
  const mine = values.kind === "text";
  return html`<div id="reply-text" class="reply-text" data-draft-for="${view.contactId}"${oob}>
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

/**
 * The template part of the reply box (`#reply-template-part`): offered whether the window is open or
 * closed (a template can always be sent). A window that opens or closes does not replace it.
 */
function renderReplyTemplates(view: ReplyView, values: ReplyValues, autofocus: boolean): Html {
  const { templates } = view;
  const selected = templates.some((t) => t.id === values.templateId) ? values.templateId : "";
  const mine = values.kind === "template";
  const shown: ReplyValues = mine
    ? values
    : { ...values, variables: {}, headerLink: "", headerFilename: "", error: undefined };
  return html`<div id="reply-template-part" class="reply-template-part">
<h3 id="reply-template-title">${view.state.mode === "text" ? "Or send a template" : "Send a template"}</h3>
${
  templates.length === 0
    ? html`<p class="warning">This number has no approved template.</p>`
    : html`${templatePicker({
        path: conversationPath(view.contactId),
        templates,
        selected,
        invalid: mine && fieldForParam(values.error?.param ?? null, undefined) === "template",
        anchor: "reply",
        autofocus,
      })}
<form id="reply-template-form" class="stack" ${formAttributes(view)}>
${hiddenFields(view.csrf, keyFor(values, "template"), "template")}
${renderTemplateFields(templates, { ...shown, templateId: selected })}
<div class="reply-actions">
${fromHint(view.state)}
<button type="submit" id="reply-template-send" class="button primary">Send template</button>
</div>
</form>`
}
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
  const { templates } = view;
  const selected = templates.some((t) => t.id === values.templateId) ? values.templateId : "";
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
  templates.length === 0
    ? html`<p class="warning">This number has no approved template.</p>`
    : html`${templatePicker({
        path: NEW_CONVERSATION_PATH,
        hidden: { sender: sender.id },
        templates,
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
${renderTemplateFields(templates, { ...values, templateId: selected })}
<div class="reply-actions">
<p class="hint reply-from">From ${sender.name ? html`${sender.name} (${sender.phone_number})` : sender.phone_number}</p>
<button type="submit" id="new-conversation-send" class="button primary">Send template</button>
</div>
</form>`
}
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
  return { template: templateRequestOf(template, values) };
}
