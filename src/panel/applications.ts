import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { findTenantApplication, listTenantApplications } from "../applications/repository.ts";
import { createApplication, revokeApplication, rotateApplicationSecret } from "../applications/service.ts";
import { ApiError } from "../http/errors.ts";
import type { Scope } from "../http/request-state.ts";
import { isId } from "../ids.ts";
import {
  APPLICATIONS_PATH,
  alreadyCreatedPage,
  applicationsPage,
  type Frame,
  type NewApplicationForm,
  OVERLAP_CHOICES,
  revokeConfirmPage,
  rotateConfirmPage,
  rotateRevokedPage,
  SCOPE_CHOICES,
  secretPage,
} from "./applications-view.ts";
import { PANEL_PREFIX } from "./paths.ts";
import { field, fields, htmlResponse, newFormToken, type PanelContext, redirect, signedIn } from "./web.ts";

export const APPLICATION_NAME_MAX = 100;
/** How long a "new application" form remembers that it was sent (a reload or double click). */
const FORM_MEMORY_SECONDS = 24 * 3600;
const FORM_ID = /^[A-Za-z0-9_-]{16,64}$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it rejects
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

function frameOf(ctx: PanelContext): Frame {
  return {
    session: ctx.session,
    csrf: ctx.csrf,
    now: ctx.deps.clock.now(),
  };
}

function emptyForm(): NewApplicationForm {
  return { name: "", scopes: SCOPE_CHOICES.map((c) => c.scope), formId: newFormToken() };
}

/** The form's values checked; errors are sentences for the person filling it in. */
export function validateNewApplication(form: Record<string, string | string[]>): {
  name: string;
  scopes: Scope[];
  errors: NewApplicationForm["errors"] | undefined;
} {
  const name = field(form, "name").trim();
  const given = fields(form, "scopes");
  const known = SCOPE_CHOICES.map((c) => c.scope);
  const scopes = known.filter((s) => given.includes(s));
  const errors: NonNullable<NewApplicationForm["errors"]> = {};
  if (name === "") errors.name = "Enter a name for the application.";
  else if ([...name].length > APPLICATION_NAME_MAX)
    errors.name = `The name is too long: use at most ${APPLICATION_NAME_MAX} characters.`;
  else if (CONTROL.test(name)) errors.name = "The name cannot contain line breaks or control characters.";
  if (given.some((s) => !(known as string[]).includes(s))) errors.scopes = "Choose only the scopes listed.";
  else if (scopes.length === 0) errors.scopes = "Choose at least one scope.";
  return { name, scopes, errors: errors.name || errors.scopes ? errors : undefined };
}

/** The tenant's application, or the same 404 as a page that does not exist (no hint it exists). */
async function tenantApplicationOr404(ctx: PanelContext) {
  const clientId = ctx.params.clientId ?? "";
  // Client ids are only ever made by newId("cid"): anything else is not looked up.
  const application = isId(clientId, "cid")
    ? await findTenantApplication(ctx.deps.db, ctx.session.tenantId, clientId)
    : undefined;
  if (!application) throw new ApiError("resource_missing", "No such page.");
  return application;
}

/** The path's application for a rotation; a revoked one's secret cannot be rotated: its 409 page instead. */
async function rotatableApplication(ctx: PanelContext) {
  const application = await tenantApplicationOr404(ctx);
  if (application.revokedAt) {
    return htmlResponse(rotateRevokedPage(frameOf(ctx), application), { status: 409 });
  }
  return application;
}

/** Applications: list, create (secret shown once), rotate secret, revoke. */
export function applicationPages(deps: AppDeps) {
  /**
   * Claims a form id for one creation. Undefined: go ahead (also when Redis is unreachable: the guard
   * only spares a duplicate). Otherwise what the earlier post made ("" while it is still in flight).
   */
  async function claimForm(tenantId: string, formId: string): Promise<string | undefined> {
    if (!FORM_ID.test(formId)) return undefined;
    try {
      const key = deps.keys.panelNewApplicationForm(tenantId, formId);
      const claimed = await deps.redis.set(key, "", "EX", FORM_MEMORY_SECONDS, "NX");
      if (claimed === "OK") return undefined;
      return (await deps.redis.get(key)) ?? "";
    } catch {
      return undefined;
    }
  }

  async function settleForm(tenantId: string, formId: string, clientId: string | undefined) {
    if (!FORM_ID.test(formId)) return;
    const key = deps.keys.panelNewApplicationForm(tenantId, formId);
    try {
      if (clientId) await deps.redis.set(key, clientId, "EX", FORM_MEMORY_SECONDS, "XX");
      else await deps.redis.del(key);
    } catch {
      // The guard is a convenience; the application itself is created or not regardless.
    }
  }

  async function listPage(ctx: PanelContext, form: NewApplicationForm, status = 200) {
    const applications = await listTenantApplications(deps.db, ctx.session.tenantId);
    const revokedId = ctx.query.revoked;
    const revoked = revokedId ? applications.find((a) => a.clientId === revokedId && a.revokedAt) : undefined;
    return htmlResponse(applicationsPage(frameOf(ctx), { applications, form, revoked }), { status });
  }

  return new Elysia({ prefix: PANEL_PREFIX })
    .get(
      "/applications",
      signedIn(deps, (ctx) => listPage(ctx, emptyForm())),
    )
    .post(
      "/applications",
      signedIn(deps, async (ctx) => {
        const { name, scopes, errors } = validateNewApplication(ctx.form);
        const formId = field(ctx.form, "form_id");
        if (errors) {
          const given = ctx.form.scopes;
          return listPage(
            ctx,
            {
              name,
              scopes: given === undefined ? [] : Array.isArray(given) ? given : [given],
              formId: FORM_ID.test(formId) ? formId : newFormToken(),
              errors,
            },
            400,
          );
        }
        const tenantId = ctx.session.tenantId;
        const earlier = await claimForm(tenantId, formId);
        if (earlier !== undefined) {
          const application = earlier ? await findTenantApplication(deps.db, tenantId, earlier) : undefined;
          return htmlResponse(alreadyCreatedPage(frameOf(ctx), application), { status: 409 });
        }
        let created: Awaited<ReturnType<typeof createApplication>> | undefined;
        try {
          created = await createApplication(deps.db, { tenantId, name, scopes });
        } finally {
          await settleForm(tenantId, formId, created?.application.clientId);
        }
        // Answered here, not redirected: the secret exists only in this response.
        return htmlResponse(
          secretPage(frameOf(ctx), {
            ...created,
            rotated: false,
            baseUrl: deps.config.publicBaseUrl,
          }),
          { status: 201 },
        );
      }),
    )
    .get(
      "/applications/:clientId/rotate-secret",
      signedIn(deps, async (ctx) => {
        const application = await rotatableApplication(ctx);
        if (application instanceof Response) return application;
        return htmlResponse(rotateConfirmPage(frameOf(ctx), application));
      }),
    )
    .post(
      "/applications/:clientId/rotate-secret",
      signedIn(deps, async (ctx) => {
        const application = await rotatableApplication(ctx);
        if (application instanceof Response) return application;
        // No choice sent (an older form, a script): none, as rotation always was.
        const given = field(ctx.form, "overlap") || "0";
        const overlap = OVERLAP_CHOICES.find((choice) => String(choice.seconds) === given);
        if (!overlap) {
          return htmlResponse(
            rotateConfirmPage(frameOf(ctx), application, "Choose one of the options listed."),
            { status: 400 },
          );
        }
        const rotated = await rotateApplicationSecret(
          deps.db,
          application.clientId,
          { tenantId: ctx.session.tenantId, unrevoked: true },
          { seconds: overlap.seconds, now: deps.clock.now() },
        );
        // Revoked between the two statements: the same answer as above.
        if (!rotated) return htmlResponse(rotateRevokedPage(frameOf(ctx), application), { status: 409 });
        return htmlResponse(
          secretPage(frameOf(ctx), { ...rotated, rotated: true, baseUrl: deps.config.publicBaseUrl }),
        );
      }),
    )
    .get(
      "/applications/:clientId/revoke",
      signedIn(deps, async (ctx) =>
        htmlResponse(revokeConfirmPage(frameOf(ctx), await tenantApplicationOr404(ctx))),
      ),
    )
    .post(
      "/applications/:clientId/revoke",
      signedIn(deps, async (ctx) => {
        const application = await tenantApplicationOr404(ctx);
        await revokeApplication(deps.db, application.clientId, deps.clock, {
          tenantId: ctx.session.tenantId,
        });
        return redirect(`${APPLICATIONS_PATH}?revoked=${encodeURIComponent(application.clientId)}`, ctx.htmx);
      }),
    );
}
