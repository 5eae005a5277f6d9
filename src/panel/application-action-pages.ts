import type { ApplicationRecord } from "../applications/repository.ts";
import { previousSecretValidUntil } from "../applications/service.ts";
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
import { confirmForm, csrfInput, durationText, timeTag } from "./layout.ts";

/**
 * The pages of one application's actions: its client secret, shown once (after create and rotate),
 * a create form sent again, and the confirmations asked before revoking and rotating.
 */

/**
 * How long the replaced secret may keep working, as offered at rotation (seconds; the first, none,
 * is the default: the old secret stops at once, as it always did).
 */
export const OVERLAP_CHOICES: { seconds: number; label: string; hint: string }[] = [
  {
    seconds: 0,
    label: "Stop the old secret now",
    hint: "Token requests with it are refused from the moment the new secret is shown. Choose this when the old secret may have leaked.",
  },
  {
    seconds: 3600,
    label: "Keep the old secret working for 1 hour",
    hint: "Both secrets work for an hour: time to deploy the new one without a gap.",
  },
  {
    seconds: 86_400,
    label: "Keep the old secret working for 24 hours",
    hint: "Both secrets work for a day.",
  },
  {
    seconds: 7 * 86_400,
    label: "Keep the old secret working for 7 days",
    hint: "Both secrets work for a week, for systems that are updated slowly.",
  },
];

/** A page of one application's actions, under the breadcrumb back to the list. */
function actionPage(frame: Frame, title: string, body: Html): Html {
  return applicationsSection(
    frame,
    title,
    html`<p class="breadcrumb"><a href="${APPLICATIONS_PATH}">Applications</a></p>
${body}`,
  );
}

function credentialBlock(id: string, label: string, value: string): Html {
  return html`<div class="credential">
  <p class="credential-label" id="${id}-label">${label}</p>
  <div class="secret"><code id="${id}" aria-labelledby="${id}-label">${value}</code><button type="button" class="button subtle copy" data-copy="#${id}" aria-describedby="${id}-label">Copy</button></div>
</div>`;
}

function tokenExample(baseUrl: string, clientId: string): Html {
  const command = [
    `curl -X POST ${baseUrl}/oauth/token \\`,
    "  -d grant_type=client_credentials \\",
    `  -d client_id=${clientId} \\`,
    '  -d client_secret="$CLIENT_SECRET"',
  ].join("\n");
  return html`<section class="card stack section-card" aria-labelledby="token-example-title">
  <h2 id="token-example-title">Get an access token</h2>
  <p>Keep the secret in your system's secret store (here the variable <code>CLIENT_SECRET</code>) and exchange it for a token:</p>
  <pre class="snippet"><code id="token-example">${command}</code></pre>
  <div><button type="button" class="button subtle copy" data-copy="#token-example">Copy command</button></div>
</section>`;
}

/** The one and only time a client secret is shown: after create and after rotate. */
export function secretPage(
  frame: Frame,
  input: { application: ApplicationRecord; clientSecret: string; rotated: boolean; baseUrl: string },
): Html {
  const { application, clientSecret, rotated } = input;
  const overlapUntil = rotated ? previousSecretValidUntil(application, frame.now) : undefined;
  const lifetime = durationText(TOKEN_LIFETIME_SECONDS);
  return actionPage(
    frame,
    rotated ? "New client secret" : "Application created",
    html`<h1>${rotated ? html`New secret for “${application.name}”` : html`“${application.name}” is ready`}</h1>
<div class="warning secret-warning">
  <p><strong>Copy the client secret now and store it somewhere safe.</strong> It is shown only on this page and will
  not be shown again: it is not stored anywhere, so nobody can look it up later. If it is lost, rotate the secret to
  get a new one.</p>
</div>
${
  rotated && overlapUntil
    ? html`<p class="notice" role="status">The old secret keeps working until ${utcTimeTag(overlapUntil)} (${timeTag(overlapUntil, frame.now)}); then token requests with it are refused. Move your system to the new secret before then. Access tokens already issued stay valid until they expire.</p>`
    : rotated
      ? html`<p class="notice" role="status">The old secret stopped working just now: token requests with it are refused. Access tokens already issued with it stay valid until they expire, up to ${lifetime} from when they were issued. Update your system with the new secret.</p>`
      : ""
}
<section class="card stack section-card" aria-labelledby="credentials-title">
  <h2 id="credentials-title">Credentials</h2>
  ${credentialBlock("client-id", "Client ID", application.clientId)}
  ${credentialBlock("client-secret", "Client secret (shown once)", clientSecret)}
  <div class="credential"><p class="credential-label">Scopes</p>${scopeBadges(application.scopes)}</div>
</section>
${tokenExample(input.baseUrl, application.clientId)}
<p><a class="button primary" href="${APPLICATIONS_PATH}">I have stored the secret: back to applications</a></p>`,
  );
}

/** A second post of the same "new application" form (reload, double click): nothing new was made. */
export function alreadyCreatedPage(frame: Frame, application: ApplicationRecord | undefined): Html {
  return actionPage(
    frame,
    "Already created",
    html`<h1>This form was already sent</h1>
<div class="card stack">
  ${
    application
      ? html`<p>It created the application <strong>${application.name}</strong> (<code>${application.clientId}</code>), and its secret was shown then. It cannot be shown again; no second application was created.</p>
  ${application.revokedAt ? "" : html`<p>If the secret was not stored, rotate it to get a new one.</p><p>${rotateLink(application, "Rotate its secret…")}</p>`}`
      : html`<p>The application it asked for is being created or was created already; no second one was made.</p>`
  }
  <p><a class="button" href="${APPLICATIONS_PATH}">Back to applications</a></p>
</div>`,
  );
}

/** Asked before revoking; the page works without JavaScript. */
export function revokeConfirmPage(frame: Frame, application: ApplicationRecord): Html {
  const lifetime = durationText(TOKEN_LIFETIME_SECONDS);
  if (application.revokedAt) {
    return actionPage(
      frame,
      "Already revoked",
      html`<h1>“${application.name}” is already revoked</h1>
<div class="card stack">
  <p>It was revoked ${timeTag(application.revokedAt, frame.now)} and can no longer get access tokens.</p>
  <p><a class="button" href="${APPLICATIONS_PATH}">Back to applications</a></p>
</div>`,
    );
  }
  const lastToken = application.lastTokenAt;
  const validUntil = lastToken && new Date(lastToken.getTime() + TOKEN_LIFETIME_SECONDS * 1000);
  return actionPage(
    frame,
    `Revoke ${application.name}`,
    html`<h1>Revoke “${application.name}”?</h1>
<div class="card stack revoke">
  <dl class="facts">
    <div><dt>Client ID</dt><dd><code>${application.clientId}</code></dd></div>
    <div><dt>Scopes</dt><dd>${scopeBadges(application.scopes)}</dd></div>
    <div><dt>Created</dt><dd>${timeTag(application.createdAt, frame.now)}</dd></div>
    <div><dt>Last token issued</dt><dd>${lastToken ? timeTag(lastToken, frame.now) : "never"}</dd></div>
  </dl>
  <div class="warning">
    <p><strong>Revoking is permanent.</strong> A revoked application cannot be restored.</p>
    <ul class="bullets">
      <li>It can no longer get access tokens: the token endpoint refuses its credentials at once.</li>
      <li>Access tokens it already has keep working until they expire, up to ${lifetime} after they were issued${
        validUntil && validUntil > frame.now
          ? html` (its last token expires ${timeTag(validUntil, frame.now)})`
          : ""
      }.</li>
      <li>To keep a system running, create a new application first and move the system to its credentials.</li>
    </ul>
  </div>
  ${confirmForm(frame.csrf, appPath(application, "revoke"), "Revoke application", APPLICATIONS_PATH)}
</div>`,
  );
}

/** Rotating a revoked application's secret is refused (409): it could never get a token again. */
export function rotateRevokedPage(frame: Frame, application: ApplicationRecord): Html {
  return actionPage(
    frame,
    "Application revoked",
    html`<h1>“${application.name}” is revoked</h1>
<div class="card stack">
  <p class="error" role="alert">A revoked application's secret cannot be rotated: it can never get access tokens again. Create a new application instead.</p>
  <p class="row"><a class="button primary" href="${APPLICATIONS_PATH}#new-application">New application</a> <a class="button" href="${APPLICATIONS_PATH}">Back to applications</a></p>
</div>`,
  );
}

/** Asked before rotating: whether the old secret keeps working for a while. Works without JavaScript. */
export function rotateConfirmPage(frame: Frame, application: ApplicationRecord, error?: string): Html {
  const running = previousSecretValidUntil(application, frame.now);
  const errorId = error ? "overlap-error" : undefined;
  return actionPage(
    frame,
    `Rotate the secret of ${application.name}`,
    html`<h1>Rotate the secret of “${application.name}”</h1>
<div class="card stack rotate">
  <p>A new client secret is made and shown once. Access tokens already issued stay valid until they expire (up to ${durationText(TOKEN_LIFETIME_SECONDS)}).</p>
  ${
    running
      ? html`<p class="warning">A secret replaced earlier still works until ${utcTimeTag(running)}. Rotating again stops it now: only the secret being replaced can keep working.</p>`
      : ""
  }
  ${error ? html`<p class="error" role="alert" id="${errorId}">${error}</p>` : ""}
  <form method="post" action="${appPath(application, "rotate-secret")}" class="stack">
    ${csrfInput(frame.csrf)}
    <fieldset class="field overlap-choices"${errorId ? html` aria-describedby="${errorId}"` : ""}>
      <legend>The current secret</legend>
      ${OVERLAP_CHOICES.map(
        (choice, index) => html`<label class="check">
        <input type="radio" name="overlap" value="${choice.seconds}"${index === 0 ? html` checked` : ""} aria-describedby="overlap-hint-${index}">
        <span><span class="scope-label">${choice.label}</span>
        <span class="hint" id="overlap-hint-${index}">${choice.hint}</span></span>
      </label>`,
      )}
    </fieldset>
    <div class="row">
      <button type="submit" class="button primary">Rotate secret</button>
      <a class="button" href="${APPLICATIONS_PATH}">Cancel</a>
    </div>
  </form>
</div>`,
  );
}
