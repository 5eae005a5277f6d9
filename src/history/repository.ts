import { sql } from "kysely";
import type { Db } from "../db/connect.ts";
import type { HistoryMessageRow } from "./presenter.ts";

/** The retry state presentRetrying reads: HistoryMessage's and Message's `retrying`, and the panel's. */
export const RETRY_STATE_COLUMNS = [
  "messages.send_attempts",
  "messages.send_not_before",
  "messages.last_error",
] as const;

/** What to select from `messages` for presentHistoryMessage (aliases keep joined queries unambiguous). */
export const HISTORY_COLUMNS = [
  "messages.id",
  "messages.direction",
  "messages.type",
  "messages.preview",
  "messages.text",
  "messages.media_type",
  "messages.media_filename",
  "messages.status",
  "messages.failure",
  "messages.client_reference",
  "messages.created_at",
  ...RETRY_STATE_COLUMNS,
] as const;

/** Where a message sits in its contact's history: created time, then the internal seq for ties. */
export interface HistoryPosition {
  created_at: Date;
  seq: number;
}

export async function findHistoryPosition(
  db: Db,
  tenantId: string,
  contactId: string,
  messageId: string,
): Promise<HistoryPosition | undefined> {
  return db
    .selectFrom("messages")
    .select(["created_at", "seq"])
    .where("tenant_id", "=", tenantId)
    .where("contact_id", "=", contactId)
    .where("id", "=", messageId)
    .executeTakeFirst();
}

export interface HistoryPageQuery {
  tenantId: string;
  contactId: string;
  order: "asc" | "desc";
  limit: number;
  before?: HistoryPosition;
}

/**
 * A contact's messages (system ones left out) in (created_at, seq) order, before a position, one
 * more than the page: the query GET history and the panel's thread each select their columns from.
 */
export function historyQuery(db: Db, query: HistoryPageQuery) {
  const { before } = query;
  return db
    .selectFrom("messages")
    .where("messages.tenant_id", "=", query.tenantId)
    .where("messages.contact_id", "=", query.contactId)
    .where(sql<boolean>`NOT is_system_message(messages.type)`)
    .$if(before !== undefined, (qb) =>
      qb.where((eb) =>
        eb(
          eb.refTuple("messages.created_at", "messages.seq"),
          "<",
          eb.tuple(before!.created_at, before!.seq),
        ),
      ),
    )
    .orderBy("messages.created_at", query.order)
    .orderBy("messages.seq", query.order)
    .limit(query.limit + 1);
}

/** One page plus whether more follow; ordered by (created_at, seq), so equal seconds never reorder. */
export async function listHistoryPage(
  db: Db,
  query: HistoryPageQuery,
): Promise<{ rows: HistoryMessageRow[]; hasMore: boolean }> {
  const rows = await historyQuery(db, query).select(HISTORY_COLUMNS).execute();
  return { rows: rows.slice(0, query.limit), hasMore: rows.length > query.limit };
}
