import { type Selectable, sql, type Updateable } from "kysely";
import type { Db } from "../db/connect.ts";
import type { EventType, WebhookEndpointsTable } from "../db/schema.ts";
import { findTenantRow } from "../db/tenant-row.ts";
import { type PositionRange, positionRange } from "../events/repository.ts";

export type EndpointRow = Selectable<WebhookEndpointsTable>;

/** Where delivery stands, from the endpoint's cursor and its acknowledgements past it. */
export interface DeliveryCounts {
  pending: number;
  oldest_pending_at: Date | null;
}

export function insertEndpoint(
  db: Db,
  row: {
    id: string;
    tenantId: string;
    url: string;
    /** null: every type, including types added later. */
    events: EventType[] | null;
    description: string | null;
    sealedSecret: string;
    cursorSeq: number;
  },
): Promise<EndpointRow> {
  return db
    .insertInto("webhook_endpoints")
    .values({
      id: row.id,
      tenant_id: row.tenantId,
      url: row.url,
      events: row.events,
      description: row.description,
      secret: row.sealedSecret,
      cursor_seq: row.cursorSeq,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export function countEndpoints(db: Db, tenantId: string): Promise<number> {
  return db
    .selectFrom("webhook_endpoints")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("tenant_id", "=", tenantId)
    .executeTakeFirstOrThrow()
    .then((row) => Number(row.n));
}

export function listEndpoints(db: Db, tenantId: string): Promise<EndpointRow[]> {
  return db
    .selectFrom("webhook_endpoints")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .orderBy("created_at")
    .orderBy("id")
    .execute();
}

export function findEndpoint(db: Db, tenantId: string, id: string): Promise<EndpointRow | undefined> {
  return findTenantRow(db, "webhook_endpoints", tenantId, id);
}

/** The enabled endpoints of these tenants: whom a new event concerns. */
export async function enabledEndpointIds(db: Db, tenantIds: readonly string[]): Promise<string[]> {
  if (tenantIds.length === 0) return [];
  const rows = await db
    .selectFrom("webhook_endpoints")
    .select("id")
    .where("tenant_id", "in", tenantIds)
    .where("status", "=", "enabled")
    .execute();
  return rows.map((row) => row.id);
}

export type EndpointChange = Pick<
  Updateable<WebhookEndpointsTable>,
  "url" | "events" | "description" | "status" | "disabled_reason" | "cursor_seq" | "paused_until" | "retry_at"
>;

/**
 * Changes an endpoint; `restart` raises its generation, so a delivery run of the old one stops and
 * writes nothing (a replay, new event types), and drops what was acknowledged past the
 * cursor or waits for a retry: delivery starts over from `cursor_seq`.
 */
export async function updateEndpoint(
  db: Db,
  tenantId: string,
  id: string,
  change: EndpointChange,
  options: { restart?: boolean; retryNow?: boolean } = {},
): Promise<EndpointRow | undefined> {
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .updateTable("webhook_endpoints")
      .set(change)
      .$if(options.restart === true, (qb) => qb.set((eb) => ({ generation: eb("generation", "+", 1) })))
      .where("tenant_id", "=", tenantId)
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirst();
    if (!row) return undefined;
    if (options.restart) {
      await trx.deleteFrom("webhook_deliveries").where("endpoint_id", "=", id).execute();
    } else if (options.retryNow) {
      // Re-enabled: the events waiting for a retry are tried at once, and their 3 days start again.
      await trx
        .updateTable("webhook_deliveries")
        .set({ attempts: 0, first_failed_at: null, next_attempt_at: null })
        .where("endpoint_id", "=", id)
        .where("acknowledged", "=", false)
        .execute();
    }
    return row;
  });
}

/** An endpoint's signing secrets after a rotation: the new one, and the one previous (null: none). */
export type SecretChange = Pick<
  Updateable<WebhookEndpointsTable>,
  "secret" | "previous_secret" | "previous_secret_expires_at"
>;

/**
 * Rotates an endpoint's secret: `rotate` makes the new secrets from the row as it is, locked, so two
 * rotations at once take turns and each one's new secret is the next one's previous.
 */
export async function replaceEndpointSecret(
  db: Db,
  tenantId: string,
  id: string,
  rotate: (current: EndpointRow) => SecretChange,
): Promise<EndpointRow | undefined> {
  return db.transaction().execute(async (trx) => {
    const current = await trx
      .selectFrom("webhook_endpoints")
      .selectAll()
      .where("tenant_id", "=", tenantId)
      .where("id", "=", id)
      .forUpdate()
      .executeTakeFirst();
    if (!current) return undefined;
    return trx
      .updateTable("webhook_endpoints")
      .set(rotate(current))
      .where("id", "=", id)
      .returningAll()
      .executeTakeFirstOrThrow();
  });
}

export async function deleteEndpoint(db: Db, tenantId: string, id: string): Promise<boolean> {
  const result = await db
    .deleteFrom("webhook_endpoints")
    .where("tenant_id", "=", tenantId)
    .where("id", "=", id)
    .executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/**
 * Log positions past an endpoint's cursor that an endpoint read looks at, at most. Counting every
 * pending event made each read of a backed-up endpoint walk up to 30 days of the log.
 */
export const PENDING_SAMPLE_ROWS = 1000;

/** What deliveryCountsStatement reads of one endpoint. */
interface PendingSample extends PositionRange {
  id: string;
  /** Events in the range looked at; of those the endpoint's types; of these the ones not acknowledged. */
  examined: number;
  subscribed: number;
  pending: number;
  oldest_pending_at: Date | null;
  /** Events acknowledged (out of order) past the range. */
  acked_beyond: number;
}

/**
 * One statement for the endpoints' delivery counts, bounded whatever their backlog: per endpoint the
 * next PENDING_SAMPLE_ROWS positions past its cursor (positionRange: the (tenant_id, seq) index),
 * each one's acknowledgement (the primary key of webhook_deliveries), and the acknowledgements past
 * the range (webhook_deliveries holds only the ones past the cursor: a delivery run's window).
 */
export function deliveryCountsStatement(endpointIds: readonly string[]) {
  // The endpoint takes the event's type: events null is every type, those added later too.
  const subscribed = sql`(w.events IS NULL OR e.type = ANY(w.events))`;
  return sql<PendingSample>`
    SELECT w.id, r.from_seq, r.to_seq, r.head, s.examined, s.subscribed, s.pending, s.oldest_pending_at,
           (SELECT count(*)::int FROM webhook_deliveries d
            WHERE d.endpoint_id = w.id AND d.acknowledged AND d.seq > r.to_seq) AS acked_beyond
    FROM webhook_endpoints w
    CROSS JOIN LATERAL (${positionRange(sql`w.tenant_id`, sql`w.cursor_seq`, PENDING_SAMPLE_ROWS)}) r
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS examined,
             count(*) FILTER (WHERE ${subscribed})::int AS subscribed,
             count(*) FILTER (WHERE ${subscribed} AND d.seq IS NULL)::int AS pending,
             min(e.created_at) FILTER (WHERE ${subscribed} AND d.seq IS NULL) AS oldest_pending_at
      FROM events e
      LEFT JOIN webhook_deliveries d ON d.endpoint_id = w.id AND d.seq = e.seq AND d.acknowledged
      WHERE e.tenant_id = w.tenant_id AND e.seq > r.from_seq AND e.seq <= r.to_seq
    ) s
    WHERE w.id = ANY(${endpointIds}::text[])`;
}

/**
 * Each endpoint's pending events (subscribed, after its cursor, not acknowledged out of order) and
 * when the oldest of them happened, read in bounded time (deliveryCountsStatement).
 *
 * Within the first PENDING_SAMPLE_ROWS positions past the cursor the count is exact. Past them it is
 * computed from positions, dense per tenant (positionRange): the positions up to the head, times the
 * share of the endpoint's types among the events looked at (all of them for an endpoint taking every
 * type: exact again), less what was acknowledged out there. So only a type-filtering endpoint with
 * more than PENDING_SAMPLE_ROWS events past its cursor (its receiver down, or the endpoint disabled:
 * a healthy one's cursor follows the head) gets an estimate, and its oldest pending event is the
 * oldest among the ones looked at.
 */
export async function deliveryCounts(
  db: Db,
  endpoints: readonly EndpointRow[],
): Promise<Map<string, DeliveryCounts>> {
  const counts = new Map<string, DeliveryCounts>();
  if (endpoints.length === 0) return counts;
  const result = await deliveryCountsStatement(endpoints.map((endpoint) => endpoint.id)).execute(db);
  for (const row of result.rows) {
    const beyond = row.head - row.to_seq;
    const pendingBeyond =
      beyond > 0 && row.examined > 0
        ? Math.max(0, Math.round((beyond * row.subscribed) / row.examined) - row.acked_beyond)
        : 0;
    counts.set(row.id, { pending: row.pending + pendingBeyond, oldest_pending_at: row.oldest_pending_at });
  }
  return counts;
}

/**
 * Enabled endpoints with something to do now: events past the cursor (new ones, or ones whose
 * retry is due), and not paused after a run in which every attempt failed. The sweeper's backstop
 * for a lost nudge and the clock of retries.
 */
export async function endpointsDue(db: Db, now: Date): Promise<string[]> {
  const result = await sql<{ id: string }>`
    SELECT w.id FROM webhook_endpoints w
    JOIN event_heads h ON h.tenant_id = w.tenant_id
    WHERE w.status = 'enabled' AND w.cursor_seq < h.last_seq
      AND (w.paused_until IS NULL OR w.paused_until <= ${now})
      AND (w.retry_at IS NULL OR w.retry_at <= ${now})`.execute(db);
  return result.rows.map((row) => row.id);
}

/**
 * For the metrics: endpoints by state (enabled; failing: enabled, its last outcome a failure;
 * disabled), and how long the longest-failing event of an enabled endpoint has been failing.
 */
export async function endpointHealth(
  db: Db,
  now: Date,
): Promise<{ states: Record<"enabled" | "failing" | "disabled", number>; longestFailureSeconds: number }> {
  const [states, longest] = await Promise.all([
    sql<{ state: "enabled" | "failing" | "disabled"; n: number }>`
      SELECT CASE
               WHEN status = 'disabled' THEN 'disabled'
               WHEN last_failure_at IS NOT NULL AND (last_success_at IS NULL OR last_failure_at > last_success_at)
                 THEN 'failing'
               ELSE 'enabled'
             END AS state, count(*)::int AS n
      FROM webhook_endpoints GROUP BY 1`.execute(db),
    sql<{ since: Date | null }>`
      SELECT min(d.first_failed_at) AS since
      FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
      WHERE w.status = 'enabled' AND NOT d.acknowledged`.execute(db),
  ]);
  const counts = { enabled: 0, failing: 0, disabled: 0 };
  for (const row of states.rows) counts[row.state] = row.n;
  const since = longest.rows[0]?.since;
  return {
    states: counts,
    longestFailureSeconds: since ? Math.max(0, (now.getTime() - since.getTime()) / 1000) : 0,
  };
}
