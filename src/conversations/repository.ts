import type { Db } from "../db/connect.ts";
import type { HistoryMessageRow } from "../history/presenter.ts";
import { HISTORY_COLUMNS } from "../history/repository.ts";

export interface ConversationRow extends HistoryMessageRow {
  contact_id: string;
  contact_name: string | null;
  contact_phone: string;
  contact_channel: string;
  /** The customer's last inbound message (provider time): the 24-hour window runs from it. */
  contact_last_inbound_at: Date | null;
  /** When the customer opted out (DESIGN §13); null while they may be messaged. */
  contact_opted_out_at: Date | null;
  unread: number;
  last_message_at: Date;
}

export interface ConversationPageQuery {
  tenantId: string;
  order: "asc" | "desc";
  /** Rows to fetch (the caller asks for one more than it shows, to learn has_more). */
  fetch: number;
  /** Only conversations whose last message is strictly older than this. */
  before?: Date;
}

/**
 * Reads the per-contact summary (kept current by the finalize and send-accept transactions) and joins
 * exactly one message per row, by seq: the cost follows the page size, not the number of messages.
 */
export async function listConversationRows(db: Db, query: ConversationPageQuery): Promise<ConversationRow[]> {
  const { before } = query;
  return db
    .selectFrom("conversations")
    .innerJoin("contacts", "contacts.id", "conversations.contact_id")
    .innerJoin("messages", "messages.seq", "conversations.last_message_seq")
    .select(HISTORY_COLUMNS)
    .select([
      "contacts.id as contact_id",
      "contacts.name as contact_name",
      "contacts.phone as contact_phone",
      "contacts.channel as contact_channel",
      "contacts.last_inbound_at as contact_last_inbound_at",
      "contacts.opted_out_at as contact_opted_out_at",
      "conversations.unread",
      "conversations.last_message_at",
    ])
    .where("conversations.tenant_id", "=", query.tenantId)
    .$if(before !== undefined, (qb) => qb.where("conversations.last_message_at", "<", before!))
    .orderBy("conversations.last_message_at", query.order)
    .orderBy("conversations.last_message_seq", query.order)
    .limit(query.fetch)
    .execute();
}
