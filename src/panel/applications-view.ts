import type { ApplicationRecord } from "../applications/repository.ts";
import { previousSecretValidUntil } from "../applications/service.ts";
import { ALL_SCOPES, type Scope } from "../http/request-state.ts";
import { TOKEN_LIFETIME_SECONDS } from "../oauth/tokens.ts";
import {
  APPLICATIONS_PATH,
  applicationsSection,
  appPath,
  type Frame,
  rotateLink,
  scopeBadges,
  utcTimeTag,
} from "./applications-markup.ts";
import { type Html, html } from "./html.ts";
import { csrfInput, durationText, formErrors, timeTag } from "./layout.ts";
import { cell, columnHeaders } from "./list-view.ts";

export {
  alreadyCreatedPage,
  OVERLAP_CHOICES,
  revokeConfirmPage,
  rotateConfirmPage,
  rotateRevokedPage,
  secretPage,
} from "./application-action-pages.ts";
export { APPLICATIONS_PATH, type Frame, utcTimeTag } from "./applications-markup.ts";

/**
 * The pages of the Applications section; applications.ts decides which one a request gets. Here the
 * list with its "new application" form; one application's pages are application-action-pages.ts.
 */

/** How the form offers each scope; a Record, so that a new scope cannot be left out of the form. */
const SCOPE_TEXTS: Record<Scope, { label: string; hint: string }> = {
  "messaging:send": {
    label: "Send messages",
    hint: "Send text and template messages (POST /messages) and upload media (POST /media).",
  },
  "messaging:read": {
    label: "Read messages",
    hint: "Read senders, templates, contacts, conversations, message history, the message feed and events, and list webhook endpoints.",
  },
  "webhooks:manage": {
    label: "Manage webhooks",
    hint: "Create, change, delete and replay webhook endpoints and rotate their signing secrets: whoever holds it can redirect or stop your event stream.",
  },
};

export const SCOPE_CHOICES: { scope: Scope; label: string; hint: string }[] = ALL_SCOPES.map((scope) => ({
  scope,
  ...SCOPE_TEXTS[scope],
}));

export interface NewApplicationForm {
  name: string;
  scopes: string[];
  /** A fresh one per form shown, so posting the same form twice creates one application. */
  formId: string;
  errors?: { name?: string; scopes?: string };
}

/** "Previous secret valid until …" while a rotation's overlap runs; nothing otherwise. */
function previousSecretNote(application: ApplicationRecord, now: Date): Html | "" {
  const until = previousSecretValidUntil(application, now);
  if (!until || application.revokedAt) return "";
  return html`<span class="previous-secret small">Previous secret valid until ${utcTimeTag(until)} <span class="muted">(${timeTag(until, now)})</span></span>`;
}

function ids(...values: (string | false | undefined)[]): string {
  return values.filter(Boolean).join(" ");
}

function statusCell(application: ApplicationRecord, now: Date): Html {
  return application.revokedAt
    ? html`<span class="badge bad">Revoked</span> <span class="muted small">${timeTag(application.revokedAt, now)}</span>`
    : html`<span class="status-stack"><span class="badge ok">Active</span>${previousSecretNote(application, now)}</span>`;
}

function applicationRow(frame: Frame, application: ApplicationRecord): Html {
  const cidId = `cid-${application.clientId}`;
  return html`<tr role="row"${application.revokedAt ? html` class="is-revoked"` : ""}>
  <th scope="row" role="rowheader" class="app-name">${application.name}</th>
  ${cell(
    "Client ID",
    html`<span class="id-cell"><code id="${cidId}" class="client-id">${application.clientId}</code><button type="button" class="button subtle copy" data-copy="#${cidId}" aria-describedby="${cidId}">Copy</button></span>`,
  )}
  ${cell("Scopes", scopeBadges(application.scopes))}
  ${cell("Created", timeTag(application.createdAt, frame.now))}
  ${cell(
    "Last token",
    application.lastTokenAt
      ? timeTag(application.lastTokenAt, frame.now)
      : html`<span class="muted">never</span>`,
  )}
  ${cell("Status", statusCell(application, frame.now))}
  ${
    application.revokedAt
      ? html`<td role="cell" class="actions-cell is-empty"><span class="muted" aria-hidden="true">—</span></td>`
      : html`<td role="cell" class="actions-cell"><div class="row-actions">
    ${rotateLink(application)}
    <a class="button subtle danger-link" href="${appPath(application, "revoke")}">Revoke…<span class="visually-hidden"> ${application.name}</span></a>
  </div></td>`
  }
</tr>`;
}

function applicationTable(frame: Frame, applications: ApplicationRecord[]): Html {
  if (applications.length === 0) {
    return html`<div class="card blank-slate">
  <h2>No applications yet</h2>
  <p>An application is how your system signs in to the API: it gets a <strong>client ID</strong> and a
  <strong>client secret</strong>, and exchanges them for short-lived access tokens. Create one below for each
  system that sends or reads messages.</p>
</div>`;
  }
  return html`<div class="table-wrap" role="region" aria-labelledby="applications-caption" tabindex="0">
<table class="list cards applications" role="table" aria-labelledby="applications-caption">
  <caption id="applications-caption" class="visually-hidden">Your applications</caption>
  ${columnHeaders([
    "Name",
    "Client ID",
    "Scopes",
    "Created",
    "Last token issued",
    "Status",
    html`<span class="visually-hidden">Actions</span>`,
  ])}
  <tbody role="rowgroup">
    ${applications.map((a) => applicationRow(frame, a))}
  </tbody>
</table>
</div>`;
}

function newApplicationForm(frame: Frame, form: NewApplicationForm): Html {
  const errors = form.errors ?? {};
  const messages = [errors.name, errors.scopes].filter((m): m is string => Boolean(m));
  const nameError = errors.name ? "app-name-error" : undefined;
  const scopesError = errors.scopes ? "app-scopes-error" : undefined;
  return html`<section class="card new-application" id="new-application" aria-labelledby="new-application-title">
<h2 id="new-application-title">New application</h2>
${formErrors("new-application-errors", "The application was not created.", messages)}
<form method="post" action="${APPLICATIONS_PATH}" class="stack app-form">
  ${csrfInput(frame.csrf)}
  <input type="hidden" name="form_id" value="${form.formId}">
  <div class="field">
    <label for="app-name">Name</label>
    <input id="app-name" name="name" type="text" required maxlength="100" autocomplete="off" value="${form.name}" aria-describedby="${ids("app-name-hint", nameError)}"${nameError ? html` aria-invalid="true" autofocus` : ""}>
    <p class="hint" id="app-name-hint">For you and your team: which system uses it, for example “Shop backend (production)”. Up to 100 characters.</p>
    ${nameError ? html`<p class="field-error" id="${nameError}">${errors.name}</p>` : ""}
  </div>
  <fieldset class="field scopes">
    <legend>Scopes</legend>
    <p class="hint" id="app-scopes-hint">What its access tokens may do. Choose at least one; give a system only what it needs.</p>
    ${SCOPE_CHOICES.map(
      (choice, index) => html`<label class="check">
      <input type="checkbox" name="scopes" value="${choice.scope}"${form.scopes.includes(choice.scope) ? html` checked` : ""} aria-describedby="${ids(`scope-hint-${index}`, scopesError)}"${scopesError ? html` aria-invalid="true"${index === 0 && !nameError ? html` autofocus` : ""}` : ""}>
      <span><span class="scope-label">${choice.label}</span> <code class="scope">${choice.scope}</code>
      <span class="hint" id="scope-hint-${index}">${choice.hint}</span></span>
    </label>`,
    )}
    ${scopesError ? html`<p class="field-error" id="${scopesError}">${errors.scopes}</p>` : ""}
  </fieldset>
  <div><button type="submit" class="button primary">Create application</button></div>
</form>
</section>`;
}

export function applicationsPage(
  frame: Frame,
  input: {
    applications: ApplicationRecord[];
    form: NewApplicationForm;
    revoked?: ApplicationRecord;
  },
): Html {
  const { applications, revoked } = input;
  return applicationsSection(
    frame,
    "Applications",
    html`<div class="page-head">
  <h1>Applications</h1>
  ${applications.length > 0 ? html`<a class="button primary" href="#new-application">New application</a>` : ""}
</div>
<p class="lead muted">Each application has its own credentials for the API. Your systems exchange them for access tokens that are valid for ${durationText(TOKEN_LIFETIME_SECONDS)}.</p>
${
  revoked
    ? html`<p class="notice" role="status"><strong>“${revoked.name}” is revoked.</strong> It can no longer get access tokens; tokens it already has stop working within ${durationText(TOKEN_LIFETIME_SECONDS)}.</p>`
    : ""
}
${applicationTable(frame, applications)}
${newApplicationForm(frame, input.form)}`,
  );
}
