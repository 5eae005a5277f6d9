import { sql } from "kysely";
import type { AppDeps } from "../app-deps.ts";
import { open, seal } from "../crypto/secret-box.ts";
import type { EventType } from "../db/schema.ts";
import { createEventCursorCodec } from "../events/cursor.ts";
import { eventHead } from "../events/repository.ts";
import { cursorRefused, type FeedCursorCodec } from "../feed/cursor.ts";
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
  replaceEndpointSecret,
  updateEndpoint,
} from "./repository.ts";
import { ENDPOINTS_PER_TENANT, MAX_PREVIOUS_SECRET_SECONDS } from "./schemas.ts";
import { newEndpointSecret } from "./signature.ts";
import { endpointAddressProblem } from "./url-safety.ts";

/** After a rotation the replaced secret still signs for this long, unless the rotation says less (DESIGN §12). */
const SECRET_OVERLAP_SECONDS = MAX_PREVIOUS_SECRET_SECONDS;

export type EndpointDeps = Pick<AppDeps, "db" | "clock" | "queues" | "lookup"> & {
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

/** The context a replaced secret is sealed with (the current one's is the endpoint's id). */
const previousContext = (id: string) => `${id}:previous`;

/**
 * The secrets a delivery is signed with now: the current one, and the replaced one while in its
 * overlap. At most two: the row holds no more (sql/030).
 */
export function signingSecrets(key: Buffer, row: EndpointRow, now: Date): string[] {
  const current = open(key, row.secret, row.id);
  const { previous_secret: previous, previous_secret_expires_at: until } = row;
  if (previous === null || until === null || until <= now) return [current];
  return [current, open(key, previous, previousContext(row.id))];
}

async function checkUrl(deps: EndpointDeps, url: string): Promise<void> {
  const problem = await endpointAddressProblem(url, deps.config.webhooks.allowPrivateUrls, deps.lookup);
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
      // Without `events`: every type, stored as such (null), so that types added later come too.
      events: body.events ?? null,
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
    /** null: every type from now on, including types added later. */
    events?: EventType[] | null;
    description?: string | null;
    status?: "enabled" | "disabled";
  },
) {
  const found = await findEndpoint(deps.db, tenantId, id);
  if (!found) throw endpointMissing(id);
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
  // Nothing to change (`{}`): the endpoint as it is, as Stripe answers an empty update.
  if (Object.keys(change).length === 0) return presentOne(deps, found);
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

/**
 * A new secret. The replaced one keeps signing for `expirePreviousIn` seconds (0: it stops now), so
 * receivers can switch without a gap; a secret replaced before it stops at once, so that at most
 * two sign (the signature header stays small however often the secret is rotated).
 */
export async function rotateWebhookSecret(
  deps: EndpointDeps,
  tenantId: string,
  id: string,
  expirePreviousIn: number = SECRET_OVERLAP_SECONDS,
) {
  const key = deps.config.providerTokenKey;
  const secret = newEndpointSecret();
  const now = deps.clock.now();
  const row = await replaceEndpointSecret(deps.db, tenantId, id, (current) => ({
    secret: seal(key, secret, id),
    ...(expirePreviousIn > 0
      ? {
          previous_secret: seal(key, open(key, current.secret, id), previousContext(id)),
          previous_secret_expires_at: new Date(now.getTime() + expirePreviousIn * 1000),
        }
      : { previous_secret: null, previous_secret_expires_at: null }),
  }));
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
    // A feed cursor (fd_) is named as one, as GET /events names it.
    if (!position) throw cursorRefused(deps.cursors.kind, "since", since);
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
