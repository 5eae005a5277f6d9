import { sql } from "kysely";
import { epochSeconds } from "../clock.ts";
import { type MessagingState, messagingState } from "../contacts/messaging-state.ts";
import type { ContactRow } from "../contacts/repository.ts";
import { requireContact } from "../contacts/service.ts";
import type { ConversationRow } from "../conversations/repository.ts";
import { CONVERSATIONS_LIMIT } from "../conversations/schemas.ts";
import { listConversations } from "../conversations/service.ts";
import type { Db } from "../db/connect.ts";
import type { HistoryMessageRow } from "../history/presenter.ts";
import { listHistoryPage } from "../history/repository.ts";
import { positionBefore } from "../history/service.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import { listActiveSenders, type SenderRow } from "../senders/repository.ts";

/** What the Conversations pages read: the API's own queries, scoped to the signed-in tenant. */

/** Messages shown at once in a conversation; older ones are behind "Earlier messages". */
export const THREAD_PAGE_SIZE = 100;

export interface ConversationListPage {
  conversations: ConversationRow[];
  hasMore: boolean;
  /** `before` for the next (older) page: the last item's last message, epoch seconds. */
  olderBefore?: number;
}

/**
 * One page of the tenant's conversations, newest first (GET /v2/conversations: its default page
 * size and paging rules).
 */
export async function conversationListPage(
  db: Db,
  tenantId: string,
  before: number | undefined,
): Promise<ConversationListPage> {
  const page = await listConversations(db, tenantId, {
    order: "desc",
    limit: CONVERSATIONS_LIMIT.default,
    before,
  });
  const last = page.rows.at(-1);
  return {
    conversations: page.rows,
    hasMore: page.hasMore,
    olderBefore: page.hasMore && last ? epochSeconds(last.last_message_at) : undefined,
  };
}

/** The tenant's contact, or 404 for an unknown id and another tenant's alike (no hint which). */
export async function requireConversationContact(
  db: Db,
  tenantId: string,
  contactId: string,
): Promise<ContactRow> {
  // Anything but a contact id is not looked up.
  if (!isId(contactId, "ctc")) {
    throw new ApiError("resource_missing", "No such conversation.", { param: "contact_id" });
  }
  return requireContact(db, tenantId, contactId);
}

/**
 * Opening (or watching) a conversation reads it (DESIGN §3 unread): inbound messages up to now no
 * longer count, and the finalize step counts only those newer than `panel_read_at`. The row is
 * written only when that changes something (unread messages, or a read mark behind the last
 * message): the thread poll calls this every 3 s per open tab, on the row that the inbound and
 * send-accept transactions update.
 */
export async function markConversationRead(
  db: Db,
  tenantId: string,
  contactId: string,
  now: Date,
): Promise<void> {
  await db
    .updateTable("conversations")
    .set({ unread: 0, panel_read_at: sql<Date>`GREATEST(panel_read_at, ${now})` })
    .where("tenant_id", "=", tenantId)
    .where("contact_id", "=", contactId)
    .where((eb) =>
      eb.or([
        eb("unread", ">", 0),
        eb("panel_read_at", "is", null),
        eb("panel_read_at", "<", eb.ref("last_message_at")),
      ]),
    )
    .execute();
}

/**
 * The number a reply goes out from: the sender of the contact's latest message (the number the
 * customer wrote to, or we last wrote from). A contact without messages falls back to the tenant's
 * only active sender. Undefined when there is none.
 */
export async function conversationSender(
  db: Db,
  tenantId: string,
  contactId: string,
): Promise<SenderRow | undefined> {
  const latest = await db
    .selectFrom("messages")
    .innerJoin("senders", "senders.id", "messages.sender_id")
    .selectAll("senders")
    .where("messages.tenant_id", "=", tenantId)
    .where("messages.contact_id", "=", contactId)
    .orderBy("messages.created_at", "desc")
    .orderBy("messages.seq", "desc")
    .limit(1)
    .executeTakeFirst();
  if (latest) return latest;
  const active = await listActiveSenders(db, tenantId);
  return active.length === 1 ? active[0] : undefined;
}

export interface ThreadPage {
  /** Oldest first. */
  rows: HistoryMessageRow[];
  /** Whether messages older than the first row exist. */
  hasEarlier: boolean;
}

/** The latest messages of a contact (or those before `beforeId`), oldest first. */
export async function threadPage(
  db: Db,
  tenantId: string,
  contactId: string,
  beforeId: string | undefined,
): Promise<ThreadPage> {
  const before = await positionBefore(db, tenantId, contactId, beforeId, () => {
    return new ApiError("resource_missing", "No such message in this conversation.");
  });
  const page = await listHistoryPage(db, {
    tenantId,
    contactId,
    order: "desc",
    limit: THREAD_PAGE_SIZE,
    before,
  });
  return { rows: page.rows.reverse(), hasEarlier: page.hasMore };
}

/**
 * How a reply can be made now: free text (window open), a template (closed), not at all (no active
 * sender), or not to this customer at all (they opted out, DESIGN §13).
 */
export type ReplyMode = "text" | "template" | "none" | "opted_out";

export interface ConversationState {
  contact: ContactRow;
  sender: SenderRow | undefined;
  messaging: MessagingState;
  mode: ReplyMode;
}

/** The window as SPEC §3 defines it, judged for the sender the reply would use. */
export async function conversationState(
  db: Db,
  tenantId: string,
  contact: ContactRow,
  now: Date,
): Promise<ConversationState> {
  const sender = await conversationSender(db, tenantId, contact.id);
  const active = sender?.active === true;
  const messaging = messagingState(contact.last_inbound_at, now, active, contact.opted_out_at !== null);
  // The opt-out wins over the window (a send is refused with recipient_opted_out first).
  const mode: ReplyMode = messaging.opted_out
    ? "opted_out"
    : !active
      ? "none"
      : messaging.within_window
        ? "text"
        : "template";
  return { contact, sender, messaging, mode };
}
