import { type RawBuilder, sql } from "kysely";
import { DAY_MS } from "../clock.ts";
import { CONTACT_IDENTITY_COLUMNS } from "../contacts/repository.ts";
import type { Expiry } from "../db/batched-delete.ts";
import type { Db } from "../db/connect.ts";
import type { EventType } from "../db/schema.ts";
import type { FeedRow } from "../feed/repository.ts";
import type { LogRead } from "../feed/service.ts";
import { HISTORY_COLUMNS } from "../history/repository.ts";

/**
 * An event as read with its message (message.*: the FeedRow's columns) or, for an event about a
 * contact (contact.merged), with null message columns and the contact it names.
 */
export interface EventRow extends FeedRow {
  /** The contact's name and channel (an event about a contact presents the whole contact). */
  contact_name: string | null;
  contact_channel: string;
  /** What an event about a contact carries (contact.merged: `{merged: [ids]}`); null otherwise. */
  event_data: { merged: string[] } | null;
  event_seq: number;
  event_id: string;
  event_type: EventType;
  event_status: string | null;
  event_failure: FeedRow["failure"];
  event_created_at: Date;
}

/**
 * The tenant's events after `afterSeq` in log order, with their messages (an EventRow each): the
 * query GET /events and the webhook delivery (src/push/) both narrow.
 */
export function eventEntriesAfter(db: Db, tenantId: string, afterSeq: number, types?: readonly EventType[]) {
  return (
    db
      .selectFrom("events")
      // An event about a contact names no message: its contact is the event's own (contact.merged).
      .leftJoin("messages", "messages.id", "events.message_id")
      .innerJoin("contacts", (join) =>
        join.on(sql<boolean>`contacts.id = coalesce(messages.contact_id, events.contact_id)`),
      )
      .select(HISTORY_COLUMNS)
      .select([
        "messages.seq",
        ...CONTACT_IDENTITY_COLUMNS,
        "events.seq as event_seq",
        "events.id as event_id",
        "events.type as event_type",
        "events.status as event_status",
        "events.failure as event_failure",
        "events.created_at as event_created_at",
        "events.data as event_data",
        "contacts.name as contact_name",
        "contacts.channel as contact_channel",
      ])
      .where("events.tenant_id", "=", tenantId)
      .where("events.seq", ">", afterSeq)
      .$if(types !== undefined, (qb) => qb.where("events.type", "in", types ?? []))
      .orderBy("events.seq")
      .$castTo<EventRow>()
  );
}

/** The tenant's events after `afterSeq`, in log order, `fetch` of them at most, with their messages. */
export function readEventEntries(
  db: Db,
  tenantId: string,
  afterSeq: number,
  fetch: number,
  types?: readonly EventType[],
): Promise<EventRow[]> {
  return eventEntriesAfter(db, tenantId, afterSeq, types).limit(fetch).execute();
}

/**
 * Log positions a read filtered by type examines at most (GET /events?types=…). Unbounded, a filter
 * whose types are rare walked the whole 30 days after the cursor on every call; bounded, a call reads
 * at most this many positions and its cursor moves past them (src/feed/service.ts, LogRead).
 */
export const EVENT_SCAN_ROWS = 5000;

/**
 * The next `count` positions of a tenant's log past `after`, as (from_seq, to_seq], with its head.
 * Positions are dense per tenant (the sequencer numbers a tenant's events contiguously after its
 * head) and retention takes them oldest first, so the range starts at the first one kept: a cursor
 * from before retention does not step through positions that are gone. A range of positions, not a
 * LIMIT over an ordered scan, keeps the rows read bounded whatever plan the planner picks (without
 * statistics it sorted every row past the cursor). `tenant` and `after` may be columns (a LATERAL
 * per webhook endpoint) or values.
 */
export function positionRange(tenant: RawBuilder<string>, after: RawBuilder<number>, count: number) {
  // OFFSET 0 keeps each subquery from being pulled up into the query around it, which evaluated the
  // lookups of the first position and the head once per reference instead of once.
  return sql<PositionRange>`
    SELECT r.from_seq, greatest(r.from_seq, least(r.from_seq + ${count}::int, r.head)) AS to_seq, r.head
    FROM (SELECT greatest(${after}, coalesce((SELECT min(seq) FROM events WHERE tenant_id = ${tenant}), 1) - 1) AS from_seq,
                 coalesce((SELECT last_seq FROM event_heads WHERE tenant_id = ${tenant}), 0) AS head
          OFFSET 0) r
    OFFSET 0`;
}

export interface PositionRange {
  from_seq: number;
  to_seq: number;
  head: number;
}

/** positionRange of a tenant and cursor given as values, run on its own (the first of a bounded read's two statements). */
export async function nextPositions(
  db: Db,
  tenantId: string,
  afterSeq: number,
  count: number,
): Promise<PositionRange> {
  const { rows } = await positionRange(sql`${tenantId}`, sql`${afterSeq}::bigint`, count).execute(db);
  return rows[0] ?? { from_seq: afterSeq, to_seq: afterSeq, head: afterSeq };
}

/** eventEntriesAfter's query, as a caller of eventsInNextPositions narrows it. */
export type EventEntriesQuery = ReturnType<typeof eventEntriesAfter>;

/** A query of event entries, narrowed or not: limited, then run. */
interface LimitableQuery<R> {
  limit(count: number): { execute(): Promise<R[]> };
}

/** A read bounded by positions: `fetch` events at most among the next `positions` after `afterSeq`. */
export interface PositionsRead {
  afterSeq: number;
  positions: number;
  fetch: number;
  /** Only events of these types; all when undefined. */
  types: readonly EventType[] | undefined;
}

/**
 * The tenant's events among the read's next positions (nextPositions), with that range. `narrow` adds
 * to the query (src/push/delivery-store.ts: each event's delivery state, unacknowledged ones only).
 *
 * Two statements, the range first: every position up to the head it read is committed (the head
 * moves in the transaction that numbers them), so the second statement, which may see later
 * commits, sees all of the range.
 */
export function eventsInNextPositions(
  db: Db,
  tenantId: string,
  read: PositionsRead,
): Promise<{ range: PositionRange; rows: EventRow[] }>;
export function eventsInNextPositions<R>(
  db: Db,
  tenantId: string,
  read: PositionsRead,
  narrow: (entries: EventEntriesQuery) => LimitableQuery<R>,
): Promise<{ range: PositionRange; rows: R[] }>;
export async function eventsInNextPositions(
  db: Db,
  tenantId: string,
  read: PositionsRead,
  narrow: (entries: EventEntriesQuery) => LimitableQuery<unknown> = (entries) => entries,
): Promise<{ range: PositionRange; rows: unknown[] }> {
  const range = await nextPositions(db, tenantId, read.afterSeq, read.positions);
  const rows =
    range.to_seq > range.from_seq
      ? await narrow(
          eventEntriesAfter(db, tenantId, range.from_seq, read.types).where("events.seq", "<=", range.to_seq),
        )
          .limit(read.fetch)
          .execute()
      : [];
  return { range, rows };
}

/**
 * The tenant's events of `types` among the next EVENT_SCAN_ROWS positions after `afterSeq`, `fetch` of
 * them at most, and the last position examined (eventsInNextPositions).
 */
export async function readEventsOfTypes(
  db: Db,
  tenantId: string,
  afterSeq: number,
  fetch: number,
  types: readonly EventType[],
): Promise<LogRead<EventRow>> {
  const { range, rows } = await eventsInNextPositions(db, tenantId, {
    afterSeq,
    positions: EVENT_SCAN_ROWS,
    fetch,
    types,
  });
  return { rows, examinedTo: range.to_seq, stoppedShort: range.to_seq < range.head };
}

/** The tenant's last event position (0 before the first). */
export async function eventHead(db: Db, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom("event_heads")
    .select("last_seq")
    .where("tenant_id", "=", tenantId)
    .executeTakeFirst();
  return row?.last_seq ?? 0;
}

/** Events are kept 30 days (DESIGN §12). */
export const EVENT_RETENTION_MS = 30 * DAY_MS;

/** Events older than EVENT_RETENTION_MS, 10,000 a statement (src/db/batched-delete.ts). */
export const EVENT_EXPIRY: Expiry = {
  keptMs: EVENT_RETENTION_MS,
  batch: 10_000,
  statement: (cutoff, batch) => sql`
    DELETE FROM events WHERE id = ANY(ARRAY(SELECT id FROM events WHERE created_at < ${cutoff} LIMIT ${batch}))`,
};
