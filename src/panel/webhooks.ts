import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import type { EventType } from "../db/schema.ts";
import { EVENT_TYPES } from "../events/schemas.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import { ATTEMPTS_KEPT, recentAttempts } from "../push/attempt-log.ts";
import { DESCRIPTION_MAX } from "../push/schemas.ts";
import {
  changeWebhookEndpoint,
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  endpointDeps,
  getWebhookEndpoint,
  listWebhookEndpoints,
  replayWebhookEndpoint,
  rotateWebhookSecret,
} from "../push/service.ts";
import { sendTestEvent, TEST_EVENT_PREFIX } from "../push/test-event.ts";
import { PANEL_PREFIX } from "./paths.ts";
import { field, fields, htmlResponse, type PanelContext, redirect, signedIn } from "./web.ts";
import {
  deleteConfirmPage,
  type Endpoint,
  type EndpointView,
  endpointSecretPage,
  type Frame,
  type NewEndpointForm,
  type Notice,
  WEBHOOKS_PATH,
  webhooksPage,
} from "./webhooks-view.ts";

/** Deliveries shown per endpoint; the log keeps ATTEMPTS_KEPT. */
const ATTEMPTS_SHOWN = 10;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it rejects
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

function frameOf(ctx: PanelContext): Frame {
  return { session: ctx.session, csrf: ctx.csrf, now: ctx.deps.clock.now() };
}

function emptyForm(): NewEndpointForm {
  return { url: "", events: [], description: "" };
}

/** The create form's values checked; errors are sentences for the person filling it in. */
export function validateNewEndpoint(form: Record<string, string | string[]>): {
  form: NewEndpointForm;
  body?: { url: string; events?: EventType[]; description: string | null };
} {
  const url = field(form, "url").trim();
  const description = field(form, "description").trim();
  const given = fields(form, "events");
  const events = EVENT_TYPES.filter((type) => given.includes(type));
  const errors: NonNullable<NewEndpointForm["errors"]> = {};
  if (url === "") errors.url = "Enter the URL events are posted to.";
  if (given.some((type) => !(EVENT_TYPES as readonly string[]).includes(type)))
    errors.events = "Choose only the event types listed.";
  if ([...description].length > DESCRIPTION_MAX)
    errors.description = `The description is too long: use at most ${DESCRIPTION_MAX} characters.`;
  else if (CONTROL.test(description))
    errors.description = "The description cannot contain line breaks or control characters.";
  const values: NewEndpointForm = { url, events: given, description };
  if (Object.keys(errors).length > 0) return { form: { ...values, errors } };
  return {
    form: values,
    // None chosen: every type, as the API does when `events` is left out.
    body: { url, ...(events.length > 0 && { events }), description: description || null },
  };
}

/** An ApiError the person can act on, as a sentence ("url must be …" → "The URL must be …"). */
function sentence(error: ApiError): string {
  return error.param === "url" ? error.message.replace(/^url /, "The URL ") : error.message;
}

/** The endpoint id of the path; anything that is not a `we_` id is the same 404 as another tenant's. */
function endpointIdOf(ctx: PanelContext): string {
  const id = ctx.params.endpointId ?? "";
  if (!isId(id, "we")) throw new ApiError("resource_missing", "No such page.");
  return id;
}

/** Webhooks: endpoints with their delivery state and last deliveries; create, test, replay, rotate, enable/disable, delete. */
export function webhookPages(deps: AppDeps) {
  const endpoints = endpointDeps(deps);

  /** The attempt log is diagnostics in Redis: unreadable, the page still shows everything else. */
  function attemptsOf(endpointId: string, count: number) {
    return recentAttempts(deps.redis, deps.keys, endpointId, count).catch(() => null);
  }

  /** What `?deleted=…`, `?tested=…&event=…` and the like, left by an action's redirect, report. */
  async function noticeOf(ctx: PanelContext, list: Endpoint[]): Promise<Notice | undefined> {
    const { query } = ctx;
    if (query.deleted && isId(query.deleted, "we")) return { kind: "deleted", endpointId: query.deleted };
    for (const kind of ["enabled", "disabled", "replayed"] as const) {
      const endpoint = list.find((e) => e.id === query[kind]);
      if (endpoint) return { kind, endpoint };
    }
    const tested = list.find((e) => e.id === query.tested);
    const eventId = query.event ?? "";
    if (tested && eventId.startsWith(TEST_EVENT_PREFIX)) {
      const attempts = (await attemptsOf(tested.id, ATTEMPTS_KEPT)) ?? [];
      return {
        kind: "tested",
        endpoint: tested,
        eventId,
        attempt: attempts.find((a) => a.event_id === eventId),
      };
    }
    return undefined;
  }

  async function listPage(
    ctx: PanelContext,
    options: {
      form?: NewEndpointForm;
      replay?: { id: string; since: string; error: string };
      status?: number;
    } = {},
  ): Promise<Response> {
    const list = await listWebhookEndpoints(endpoints, ctx.session.tenantId);
    const [views, notice] = await Promise.all([
      Promise.all(
        list.map(
          async (endpoint): Promise<EndpointView> => ({
            endpoint,
            attempts: await attemptsOf(endpoint.id, ATTEMPTS_SHOWN),
            ...(options.replay?.id === endpoint.id && { replay: options.replay }),
          }),
        ),
      ),
      options.status ? undefined : noticeOf(ctx, list),
    ]);
    return htmlResponse(
      webhooksPage(frameOf(ctx), { endpoints: views, form: options.form ?? emptyForm(), notice }),
      { status: options.status ?? 200 },
    );
  }

  const back = (ctx: PanelContext, query: string) => redirect(`${WEBHOOKS_PATH}?${query}`, ctx.htmx);

  return new Elysia({ prefix: PANEL_PREFIX })
    .get(
      "/webhooks",
      signedIn(deps, (ctx) => listPage(ctx)),
    )
    .post(
      "/webhooks",
      signedIn(deps, async (ctx) => {
        const { form, body } = validateNewEndpoint(ctx.form);
        if (!body) return listPage(ctx, { form, status: 400 });
        try {
          const created = await createWebhookEndpoint(endpoints, ctx.session.tenantId, body);
          // Answered here, not redirected: the secret exists only in this response.
          return htmlResponse(
            endpointSecretPage(frameOf(ctx), { endpoint: created, secret: created.secret, rotated: false }),
            { status: 201 },
          );
        } catch (error) {
          if (!(error instanceof ApiError)) throw error;
          const errors = error.param === "url" ? { url: sentence(error) } : { form: sentence(error) };
          return listPage(ctx, { form: { ...form, errors }, status: error.status });
        }
      }),
    )
    .post(
      "/webhooks/:endpointId/test",
      signedIn(deps, async (ctx) => {
        const id = endpointIdOf(ctx);
        const attempt = await sendTestEvent(deps, ctx.session.tenantId, id);
        return back(
          ctx,
          `tested=${encodeURIComponent(id)}&event=${encodeURIComponent(attempt.event_id)}#${id}`,
        );
      }),
    )
    .post(
      "/webhooks/:endpointId/replay",
      signedIn(deps, async (ctx) => {
        const id = endpointIdOf(ctx);
        const since = field(ctx.form, "since").trim();
        try {
          await replayWebhookEndpoint(endpoints, ctx.session.tenantId, id, since === "" ? null : since);
        } catch (error) {
          if (!(error instanceof ApiError) || error.code === "resource_missing") throw error;
          return listPage(ctx, { replay: { id, since, error: sentence(error) }, status: error.status });
        }
        return back(ctx, `replayed=${encodeURIComponent(id)}#${id}`);
      }),
    )
    .post(
      "/webhooks/:endpointId/rotate-secret",
      signedIn(deps, async (ctx) => {
        const rotated = await rotateWebhookSecret(endpoints, ctx.session.tenantId, endpointIdOf(ctx));
        return htmlResponse(
          endpointSecretPage(frameOf(ctx), { endpoint: rotated, secret: rotated.secret, rotated: true }),
        );
      }),
    )
    .post(
      "/webhooks/:endpointId/status",
      signedIn(deps, async (ctx) => {
        const id = endpointIdOf(ctx);
        const status = field(ctx.form, "status");
        if (status !== "enabled" && status !== "disabled")
          throw new ApiError("parameter_invalid", "Choose enabled or disabled.", { param: "status" });
        await changeWebhookEndpoint(endpoints, ctx.session.tenantId, id, { status });
        return back(ctx, `${status}=${encodeURIComponent(id)}#${id}`);
      }),
    )
    .get(
      "/webhooks/:endpointId/delete",
      signedIn(deps, async (ctx) =>
        htmlResponse(
          deleteConfirmPage(
            frameOf(ctx),
            await getWebhookEndpoint(endpoints, ctx.session.tenantId, endpointIdOf(ctx)),
          ),
        ),
      ),
    )
    .post(
      "/webhooks/:endpointId/delete",
      signedIn(deps, async (ctx) => {
        const id = endpointIdOf(ctx);
        await deleteWebhookEndpoint(endpoints, ctx.session.tenantId, id);
        return back(ctx, `deleted=${encodeURIComponent(id)}`);
      }),
    );
}
