import { sql } from "kysely";
import type { AppDeps } from "../app-deps.ts";
import { open, seal } from "../crypto/secret-box.ts";
import type { EventType } from "../db/schema.ts";
import { createEventCursorCodec } from "../events/cursor.ts";
import { eventHead } from "../events/repository.ts";
import { EVENT_TYPES } from "../events/schemas.ts";
import type { FeedCursorCodec } from "../feed/cursor.ts";
import { currentFeedEpoch } from "../feed/repository.ts";
import { ApiError } from "../http/errors.ts";
import { newId } from "../ids.ts";
import { nudgeDrain } from "../queues/drain-nudge.ts";
import type { Queues } from "../queues/index.ts";
import { presentEndpoint } from "./presenter.ts";
import {
  countEndpoints,
  deleteEndpoint,
  deliveryCounts,
  type EndpointChange,
  type EndpointRow,
  enabledEndpointIds,
  findEndpoint,
  insertEndpoint,
  listEndpoints,
  updateEndpoint,
} from "./repository.ts";
import { ENDPOINTS_PER_TENANT } from "./schemas.ts";
import { newEndpointSecret } from "./signature.ts";
import { endpointAddressProblem } from "./url-safety.ts";

/** After a rotation the old secret still signs for this long (DESIGN §12). */
export const SECRET_OVERLAP_MS = 24 * 3600_000;

export type EndpointDeps = Pick<AppDeps, "db" | "clock" | "queues"> & {
  config: Pick<AppDeps["config"], "providerTokenKey" | "jwtSecret" | "previousSecrets"> & {
    webhooks: Pick<AppDeps["config"]["webhooks"], "allowPrivateUrls">;
  };
  cursors: FeedCursorCodec;
};

/** The endpoint service's dependencies: the app's, with the event log's cursor codec (`evc_`). */
export function endpointDeps(deps: AppDeps): EndpointDeps {
  return { ...deps, cursors: createEventCursorCodec(deps.config) };
}

/** Tells the webhook worker an endpoint has events to deliver (one waiting nudge per endpoint). */
export function nudgeEndpoint(queues: Pick<Queues, "webhook">, endpointId: string): Promise<void> {
  return nudgeDrain(queues.webhook, { endpointId }, undefined, endpointId);
}

/**
 * A timer for an endpoint's next retry: a delayed job that, when due, only nudges the endpoint (a
 * run of its own could overlap the endpoint's current one). One per endpoint and second; the
 * sweeper covers a timer Redis lost.
 */
export async function scheduleEndpointRetry(
  queues: Pick<Queues, "webhook">,
  endpointId: string,
  at: Date,
): Promise<void> {
  const due = Math.ceil(at.getTime() / 1000) * 1000;
  await queues.webhook.add(
    "retry",
    { endpointId },
    { jobId: `retry-${endpointId}-${due}`, delay: Math.max(0, due - Date.now()) },
  );
}

/** The secrets a delivery is signed with now: the current one, and the replaced ones still in their overlap. */
export function signingSecrets(key: Buffer, row: EndpointRow, now: Date): string[] {
  return [
    open(key, row.secret, row.id),
    ...row.previous_secrets
      .filter((previous) => new Date(previous.expires_at) > now)
      .map((previous) => open(key, previous.secret, `${row.id}:previous`)),
  ];
}

async function checkUrl(deps: EndpointDeps, url: string): Promise<void> {
  const problem = await endpointAddressProblem(url, deps.config.webhooks.allowPrivateUrls);
  if (problem) throw new ApiError("parameter_invalid", `url ${problem}.`, { param: "url" });
}

/** 404 for an endpoint id that is unknown or another tenant's. */
export function endpointMissing(id: string): ApiError {
  return new ApiError("resource_missing", `No such webhook endpoint: ${id}.`, { param: "endpoint_id" });
}

async function present(deps: EndpointDeps, rows: EndpointRow[]) {
  const [counts, epoch] = await Promise.all([deliveryCounts(deps.db, rows), currentFeedEpoch(deps.db)]);
  const now = deps.clock.now();
  return rows.map((row) =>
    presentEndpoint(
      row,
      counts.get(row.id),
      deps.cursors.encode(row.tenant_id, { epoch, seq: row.cursor_seq }),
      now,
    ),
  );
}

async function presentOne(deps: EndpointDeps, row: EndpointRow) {
  const [presented] = await present(deps, [row]);
  if (!presented) throw new Error("an endpoint presents as one");
  return presented;
}

export async function createWebhookEndpoint(
  deps: EndpointDeps,
  tenantId: string,
  body: { url: string; events?: EventType[]; description?: string | null },
) {
  await checkUrl(deps, body.url);
  const id = newId("we");
  const secret = newEndpointSecret();
  const row = await deps.db.transaction().execute(async (trx) => {
    // One create at a time per tenant, so that two at once cannot pass the limit together.
    await sql`SELECT 1 FROM tenants WHERE id = ${tenantId} FOR UPDATE`.execute(trx);
    if ((await countEndpoints(trx, tenantId)) >= ENDPOINTS_PER_TENANT) {
      throw new ApiError(
        "resource_limit_reached",
        `An account has at most ${ENDPOINTS_PER_TENANT} webhook endpoints; delete one first.`,
      );
    }
    return insertEndpoint(trx, {
      id,
      tenantId,
      url: body.url,
      events: body.events ?? [...EVENT_TYPES],
      description: body.description ?? null,
      sealedSecret: seal(deps.config.providerTokenKey, secret, id),
      // A new endpoint starts at the head: it receives the events that happen after it.
      cursorSeq: await eventHead(trx, tenantId),
    });
  });
  const presented = await presentOne(deps, row);
  return { ...presented, secret };
}

export async function listWebhookEndpoints(deps: EndpointDeps, tenantId: string) {
  return present(deps, await listEndpoints(deps.db, tenantId));
}

export async function getWebhookEndpoint(deps: EndpointDeps, tenantId: string, id: string) {
  const row = await findEndpoint(deps.db, tenantId, id);
  if (!row) throw endpointMissing(id);
  return presentOne(deps, row);
}

export async function changeWebhookEndpoint(
  deps: EndpointDeps,
  tenantId: string,
  id: string,
  body: {
    url?: string;
    events?: EventType[];
    description?: string | null;
    status?: "enabled" | "disabled";
  },
) {
  if (!(await findEndpoint(deps.db, tenantId, id))) throw endpointMissing(id);
  if (body.url !== undefined) await checkUrl(deps, body.url);
  const change: EndpointChange = {
    ...(body.url !== undefined && { url: body.url }),
    ...(body.events !== undefined && { events: body.events }),
    ...(body.description !== undefined && { description: body.description }),
    ...(body.status === "disabled" && { status: "disabled", disabled_reason: null }),
    // Enabled again: delivery resumes from the cursor, at once.
    ...(body.status === "enabled" && {
      status: "enabled",
      disabled_reason: null,
      paused_until: null,
      retry_at: null,
    }),
  };
  const row = await updateEndpoint(deps.db, tenantId, id, change, {
    // Other event types: the run that reads the old ones stops, and delivery starts over from the cursor.
    restart: body.events !== undefined,
    retryNow: body.status === "enabled",
  });
  if (!row) throw endpointMissing(id);
  if (row.status === "enabled") await nudgeEndpoint(deps.queues, id);
  return presentOne(deps, row);
}

export async function deleteWebhookEndpoint(deps: EndpointDeps, tenantId: string, id: string) {
  if (!(await deleteEndpoint(deps.db, tenantId, id))) throw endpointMissing(id);
  return { object: "webhook_endpoint" as const, id, deleted: true as const };
}

/** A new secret; the old one keeps signing for SECRET_OVERLAP_MS, so receivers can switch without a gap. */
export async function rotateWebhookSecret(deps: EndpointDeps, tenantId: string, id: string) {
  const current = await findEndpoint(deps.db, tenantId, id);
  if (!current) throw endpointMissing(id);
  const key = deps.config.providerTokenKey;
  const secret = newEndpointSecret();
  const now = deps.clock.now();
  // The replaced secret signs for SECRET_OVERLAP_MS more, as do earlier ones still in theirs: a
  // rotation repeated (a retry after a lost answer) never cuts off the secret the receiver has.
  const previous = [
    {
      secret: seal(key, open(key, current.secret, id), `${id}:previous`),
      expires_at: new Date(now.getTime() + SECRET_OVERLAP_MS).toISOString(),
    },
    ...current.previous_secrets.filter((old) => new Date(old.expires_at) > now),
  ];
  const row = await updateEndpoint(deps.db, tenantId, id, {
    secret: seal(key, secret, id),
    previous_secrets: JSON.stringify(previous),
  });
  if (!row) throw endpointMissing(id);
  return { ...(await presentOne(deps, row)), secret };
}

/**
 * Delivery starts over after `since` (an `evc_` cursor; null = the oldest event kept): every event
 * after it is posted again, in order, whether or not it was acknowledged before.
 */
export async function replayWebhookEndpoint(
  deps: EndpointDeps,
  tenantId: string,
  id: string,
  since: string | null,
) {
  if (!(await findEndpoint(deps.db, tenantId, id))) throw endpointMissing(id);
  let seq = 0;
  if (since !== null) {
    const position = deps.cursors.decode(tenantId, since);
    if (!position) {
      throw new ApiError("parameter_invalid", "since is not an event cursor this service gave you.", {
        param: "since",
      });
    }
    // A cursor of an older epoch restarts at the beginning, as GET /events reads it.
    seq = position.epoch === (await currentFeedEpoch(deps.db)) ? position.seq : 0;
  }
  const row = await updateEndpoint(
    deps.db,
    tenantId,
    id,
    { cursor_seq: seq, paused_until: null, retry_at: null },
    { restart: true },
  );
  if (!row) throw endpointMissing(id);
  if (row.status === "enabled") await nudgeEndpoint(deps.queues, id);
  return presentOne(deps, row);
}

/** After the sequencer numbered events of these tenants: each of their enabled endpoints is nudged. */
export async function nudgeEndpointsOf(
  deps: Pick<AppDeps, "db" | "queues">,
  tenantIds: readonly string[],
): Promise<number> {
  const ids = await enabledEndpointIds(deps.db, tenantIds);
  await Promise.all(ids.map((id) => nudgeEndpoint(deps.queues, id)));
  return ids.length;
}
