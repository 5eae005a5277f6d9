import { sql } from "kysely";
import type { Db } from "../db/connect.ts";

/**
 * The per-contact conversation summary (what GET /conversations lists), kept current by the
 * transactions that write messages. The newest message wins whatever order rows arrive in; an
 * outbound message resets `unread` (DESIGN §3), an inbound one newer than our last outbound
 * message and the panel's last look adds to it.
 */
export interface ConversationTouch {
  contactId: string;
  tenantId: string;
  messageSeq: number;
  messageAt: Date;
  direction: "inbound" | "outbound";
}

export async function touchConversations(trx: Db, touches: readonly ConversationTouch[]): Promise<void> {
  // One row per contact (a statement may not update a row twice): its newest message, and how
  // many inbound messages it brings. Sorted, so concurrent writers lock rows in one order.
  const byContact = new Map<string, ConversationTouch & { inbound: number; outboundAt: Date | null }>();
  for (const touch of touches) {
    const prior = byContact.get(touch.contactId);
    const newer =
      !prior ||
      touch.messageAt.getTime() > prior.messageAt.getTime() ||
      (touch.messageAt.getTime() === prior.messageAt.getTime() && touch.messageSeq > prior.messageSeq);
    const inbound = (prior?.inbound ?? 0) + (touch.direction === "inbound" ? 1 : 0);
    const outboundAt =
      touch.direction === "outbound" && (!prior?.outboundAt || touch.messageAt > prior.outboundAt)
        ? touch.messageAt
        : (prior?.outboundAt ?? null);
    byContact.set(touch.contactId, { ...(newer ? touch : prior!), inbound, outboundAt });
  }
  const rows = [...byContact.values()].sort((a, b) => (a.contactId < b.contactId ? -1 : 1));
  if (rows.length === 0) return;
  await trx
    .insertInto("conversations")
    .values(
      rows.map((row) => ({
        contact_id: row.contactId,
        tenant_id: row.tenantId,
        last_message_seq: row.messageSeq,
        last_message_at: row.messageAt,
        last_outbound_at: row.outboundAt,
        unread: row.outboundAt ? 0 : row.inbound,
      })),
    )
    .onConflict((oc) =>
      oc.column("contact_id").doUpdateSet({
        last_message_seq: sql`CASE WHEN (excluded.last_message_at, excluded.last_message_seq) > (conversations.last_message_at, conversations.last_message_seq) THEN excluded.last_message_seq ELSE conversations.last_message_seq END`,
        last_message_at: sql`GREATEST(conversations.last_message_at, excluded.last_message_at)`,
        last_outbound_at: sql`GREATEST(conversations.last_outbound_at, excluded.last_outbound_at)`,
        unread: sql`CASE WHEN excluded.last_outbound_at IS NOT NULL THEN 0 WHEN excluded.last_message_at > COALESCE(GREATEST(conversations.last_outbound_at, conversations.panel_read_at), '-infinity') THEN conversations.unread + excluded.unread ELSE conversations.unread END`,
      }),
    )
    .execute();
}
