import { sql } from "kysely";
import { DAY_MS } from "../clock.ts";
import { CONTACT_REF_COLUMNS } from "../contacts/repository.ts";
import type { Expiry } from "../db/batched-delete.ts";
import type { Db } from "../db/connect.ts";
import type { EventType } from "../db/schema.ts";
import type { FeedRow } from "../feed/repository.ts";
import type { LogRead } from "../feed/service.ts";
import { HISTORY_COLUMNS } from "../history/repository.ts";

export interface EventRow extends FeedRow {
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
  return db
    .selectFrom("events")
    .innerJoin("messages", "messages.id", "events.message_id")
    .innerJoin("contacts", "contacts.id", "messages.contact_id")
    .select(HISTORY_COLUMNS)
    .select([
      "messages.seq",
      ...CONTACT_REF_COLUMNS,
      "events.seq as event_seq",
      "events.id as event_id",
      "events.type as event_type",
      "events.status as event_status",
      "events.failure as event_failure",
      "events.created_at as event_created_at",
    ])
    .where("events.tenant_id", "=", tenantId)
    .where("events.seq", ">", afterSeq)
    .$if(types !== undefined, (qb) => qb.where("events.type", "in", types ?? []))
    .orderBy("events.seq");
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
 * Log rows a read filtered by type examines at most (GET /events?types=…). Unbounded, a filter whose
 * types are rare walked the whole 30 days after the cursor on every call; bounded, a call reads at
 * most this many positions and its cursor moves past them (src/feed/service.ts, LogRead).
 */
export const EVENT_SCAN_ROWS = 5000;

/**
 * The tenant's events of `types` among the next EVENT_SCAN_ROWS positions after `afterSeq`, `fetch` of
 * them at most, and the last position examined.
 *
 * Two statements, the bound first: a tenant's positions become visible in order (the sequencer
 * numbers them under its event_heads row lock), so the rows read by the second statement, which may
 * see later commits, include every one up to the bound. The bound reads the (tenant_id, seq) index
 * alone; the second statement that same range of it, EVENT_SCAN_ROWS rows at most.
 */
export async function readEventsOfTypes(
  db: Db,
  tenantId: string,
  afterSeq: number,
  fetch: number,
  types: readonly EventType[],
): Promise<LogRead<EventRow>> {
  const { rows: bounds } = await sql<{ last: number | null; examined: number }>`
    SELECT max(seq) AS last, count(*)::int AS examined
    FROM (SELECT seq FROM events WHERE tenant_id = ${tenantId} AND seq > ${afterSeq}
          ORDER BY seq LIMIT ${EVENT_SCAN_ROWS}) next_positions`.execute(db);
  const last = bounds[0]?.last ?? null;
  if (last === null) return { rows: [] };
  const rows = await eventEntriesAfter(db, tenantId, afterSeq, types)
    .where("events.seq", "<=", last)
    .limit(fetch)
    .execute();
  return { rows, examinedTo: last, stoppedShort: bounds[0]?.examined === EVENT_SCAN_ROWS };
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
