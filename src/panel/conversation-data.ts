import { sql } from "kysely";
import { type MessagingState, messagingState } from "../contacts/messaging-state.ts";
import { type ContactRow, findContact } from "../contacts/repository.ts";
import type { ConversationRow } from "../conversations/repository.ts";
import { listConversations } from "../conversations/service.ts";
import type { Db } from "../db/connect.ts";
import type { HistoryMessageRow } from "../history/presenter.ts";
import { findHistoryPosition, listHistoryPage } from "../history/repository.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import { listActiveSenders, type SenderRow } from "../senders/repository.ts";
import { listApprovedTemplates, type TemplateRow } from "../templates/repository.ts";

/** What the Conversations pages read: the API's own queries, scoped to the signed-in tenant. */

/** Conversations per page of the list (the API's default page size). */
export const LIST_PAGE_SIZE = 25;
/** Messages shown at once in a conversation; older ones are behind "Earlier messages". */
export const THREAD_PAGE_SIZE = 100;

export interface ListedConversation {
  row: ConversationRow;
  /** The customer's last inbound message (provider time): the 24-hour window runs from it. */
  lastInboundAt: Date | null;
}

export interface ConversationListPage {
  conversations: ListedConversation[];
  hasMore: boolean;
  /** `before` for the next (older) page: the last item's last message, epoch seconds. */
  olderBefore?: number;
}

/** One page of the tenant's conversations, newest first (GET /v2/conversations, same paging rules). */
export async function conversationListPage(
  db: Db,
  tenantId: string,
  before: number | undefined,
): Promise<ConversationListPage> {
  const page = await listConversations(db, tenantId, { order: "desc", limit: LIST_PAGE_SIZE, before });
  const ids = page.rows.map((row) => row.contact_id);
  const contacts =
    ids.length === 0
      ? []
      : await db
          .selectFrom("contacts")
          .select(["id", "last_inbound_at"])
          .where("tenant_id", "=", tenantId)
          .where("id", "in", ids)
          .execute();
  const inbound = new Map(contacts.map((c) => [c.id, c.last_inbound_at]));
  const last = page.rows.at(-1);
  return {
    conversations: page.rows.map((row) => ({ row, lastInboundAt: inbound.get(row.contact_id) ?? null })),
    hasMore: page.hasMore,
    olderBefore: page.hasMore && last ? Math.floor(last.last_message_at.getTime() / 1000) : undefined,
  };
}

/** The tenant's contact, or 404 for an unknown id and another tenant's alike (no hint which). */
export async function requireConversationContact(
  db: Db,
  tenantId: string,
  contactId: string,
): Promise<ContactRow> {
  const contact = isId(contactId, "ctc") ? await findContact(db, tenantId, contactId) : undefined;
  if (!contact) throw new ApiError("resource_missing", "No such conversation.", { param: "contact_id" });
  return contact;
}

/**
 * Opening (or watching) a conversation reads it (DESIGN §3 unread): inbound messages up to now no
 * longer count, and the finalize step counts only those newer than `panel_read_at`.
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
  let before: Awaited<ReturnType<typeof findHistoryPosition>>;
  if (beforeId !== undefined) {
    before = isId(beforeId, "msg") ? await findHistoryPosition(db, tenantId, contactId, beforeId) : undefined;
    if (!before) throw new ApiError("resource_missing", "No such message in this conversation.");
  }
  const page = await listHistoryPage(db, {
    tenantId,
    contactId,
    order: "desc",
    limit: THREAD_PAGE_SIZE,
    before,
  });
  return { rows: page.rows.reverse(), hasEarlier: page.hasMore };
}

/** How a reply can be made now: free text (window open), a template (closed), or not at all. */
export type ReplyMode = "text" | "template" | "none";

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
  const messaging = messagingState(contact.last_inbound_at, now, active);
  const mode: ReplyMode = !active ? "none" : messaging.within_window ? "text" : "template";
  return { contact, sender, messaging, mode };
}

/** Approved templates of the conversation's sender (what a closed window allows). */
export function replyTemplates(db: Db, tenantId: string, sender: SenderRow): Promise<TemplateRow[]> {
  return listApprovedTemplates(db, tenantId, sender.id);
}
