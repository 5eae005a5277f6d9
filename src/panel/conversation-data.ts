import { sql } from "kysely";
import { parsePhoneNumberFromString } from "libphonenumber-js/max";
import { epochSeconds } from "../clock.ts";
import { type MessagingState, messagingState } from "../contacts/messaging-state.ts";
import type { ContactRow } from "../contacts/repository.ts";
import { requireContact } from "../contacts/service.ts";
import type { ConversationNarrowing, ConversationRow } from "../conversations/repository.ts";
import { CONVERSATIONS_LIMIT } from "../conversations/schemas.ts";
import { listConversations } from "../conversations/service.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import { listActiveSenders, type SenderRow } from "../senders/repository.ts";
import { listApprovedTemplates, type TemplateRow } from "../templates/repository.ts";
import { type ThreadPage, threadPage } from "./conversation-messages.ts";
import type { PanelContext } from "./web.ts";

export {
  type InboundMediaSource,
  inboundMediaSource,
  type MessageDetails,
  messageDetails,
  type StatusStep,
  THREAD_PAGE_SIZE,
  type ThreadMessageRow,
  type ThreadPage,
  threadPage,
} from "./conversation-messages.ts";

/**
 * What the Conversations pages read: the API's own queries, scoped to the signed-in tenant. The
 * list, a conversation's contact and reply state here; its messages in conversation-messages.ts.
 */

export interface ConversationListPage {
  conversations: ConversationRow[];
  hasMore: boolean;
  /** `before` for the next (older) page: the last item's last message, epoch seconds. */
  olderBefore?: number;
}

/** The list's filters (`?filter=`), as the links name them. */
export const LIST_FILTERS = ["unread", "open", "failed"] as const;
export type ListFilter = (typeof LIST_FILTERS)[number];

export function listFilterOf(value: string | undefined): ListFilter | undefined {
  return LIST_FILTERS.find((filter) => filter === value);
}

/** What the list is narrowed to: `?filter=` and `?q=` (a name, or digits of a phone number). */
export interface ListNarrowing {
  filter?: ListFilter;
  /** The search as typed (trimmed, at most SEARCH_MAX_CHARS); undefined for none. */
  q?: string;
}

export const SEARCH_MAX_CHARS = 100;

export function listSearchOf(value: unknown): string | undefined {
  // A repeated parameter arrives as an array: not a search.
  const q = [...(typeof value === "string" ? value : "").trim()].slice(0, SEARCH_MAX_CHARS).join("");
  return q === "" ? undefined : q;
}

/**
 * A search is a phone number when it holds nothing but what phone numbers are written with and at
 * least three digits. A whole international number ("+49 151 2345 6789") finds its contact by the
 * (tenant_id, channel, phone) unique index; a part is looked for among the digits of the tenant's
 * contacts' numbers (so "0151 123", "+49 151" and "4915" all find +4915123…; a leading 0 of a
 * national form is dropped). Anything else is part of a name, a username or a BSUID, any case (ILIKE
 * over the tenant's contacts: fine for the hundreds or thousands a tenant has; a trigram index would
 * be the next step): a customer without a phone is found by what the panel shows of them.
 */
export function searchTerms(q: string): { name?: string; phone?: string; phoneDigits?: string } {
  const digits = q.replace(/\D/g, "");
  if (/^[+0-9 ()./-]+$/.test(q) && digits.length >= 3) {
    // A whole (valid, not just possible) number in international form is looked up by the
    // contacts' unique index; the start of a number is not valid yet, so it is searched as a part.
    const parsed = q.startsWith("+") ? parsePhoneNumberFromString(q) : undefined;
    if (parsed?.isValid()) return { phone: parsed.number };
    return { phoneDigits: q.startsWith("+") ? digits : digits.replace(/^0+/, "") };
  }
  return { name: q };
}

/**
 * One page of the tenant's conversations, newest first (GET /v2/conversations: its default page
 * size and paging rules), narrowed by the list's filter and search.
 */
export async function conversationListPage(
  db: Db,
  tenantId: string,
  before: number | undefined,
  narrowing: ListNarrowing = {},
  now: Date = new Date(),
): Promise<ConversationListPage> {
  const narrow: ConversationNarrowing | undefined =
    narrowing.filter === undefined && narrowing.q === undefined
      ? undefined
      : { filter: narrowing.filter, ...(narrowing.q === undefined ? {} : searchTerms(narrowing.q)), now };
  const page = await listConversations(db, tenantId, {
    order: "desc",
    limit: CONVERSATIONS_LIMIT.default,
    before,
    narrow,
  });
  const last = page.rows.at(-1);
  return {
    conversations: page.rows,
    hasMore: page.hasMore,
    olderBefore: page.hasMore && last ? epochSeconds(last.last_message_at) : undefined,
  };
}

/**
 * Unread inbound messages over all of the tenant's conversations (the tab title's count). Reads
 * the tenant's summary rows (no index on `unread`: it changes with every inbound message, and an
 * index on it would make those updates leave their row's page); the list asks only when its
 * content changed.
 */
export async function tenantUnread(db: Db, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom("conversations")
    .select(sql<number>`coalesce(sum(unread), 0)::int`.as("unread"))
    .where("tenant_id", "=", tenantId)
    .where("unread", ">", 0)
    .executeTakeFirst();
  return row?.unread ?? 0;
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

/** The conversation a panel path names (`:contactId`), in the signed-in tenant; 404 as above. */
export function pathConversationContact(ctx: PanelContext): Promise<ContactRow> {
  return requireConversationContact(ctx.deps.db, ctx.session.tenantId, ctx.params.contactId ?? "");
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

/**
 * A conversation being looked at (its page, its thread poll, the page after a reply): marked read,
 * then its reply state and a page of its thread (the latest, or before the message `beforeId`).
 */
export async function openConversation(
  db: Db,
  tenantId: string,
  contact: ContactRow,
  now: Date,
  beforeId: string | undefined,
): Promise<{ state: ConversationState; thread: ThreadPage }> {
  await markConversationRead(db, tenantId, contact.id, now);
  const [state, thread] = await Promise.all([
    conversationState(db, tenantId, contact, now),
    threadPage(db, tenantId, contact.id, beforeId),
  ]);
  return { state, thread };
}

/** A sender's approved templates; none without a sender. */
export function senderTemplates(
  db: Db,
  tenantId: string,
  sender: SenderRow | undefined,
): Promise<TemplateRow[]> {
  return sender ? listApprovedTemplates(db, tenantId, sender.id) : Promise.resolve([]);
}

/** The sender's approved templates: offered in every reply box that can send (any window state). */
export function replyTemplates(db: Db, tenantId: string, state: ConversationState): Promise<TemplateRow[]> {
  return state.mode === "text" || state.mode === "template"
    ? senderTemplates(db, tenantId, state.sender)
    : Promise.resolve([]);
}

/** What the new-conversation page shows: the active numbers, the one chosen, its templates. */
export interface NewConversationView {
  csrf: string;
  senders: SenderRow[];
  sender: SenderRow | undefined;
  templates: TemplateRow[];
}

/** The new-conversation page's numbers and templates (`?sender=` picks one of several). */
export async function newConversationView(
  db: Db,
  tenantId: string,
  csrf: string,
  senderId: string | undefined,
): Promise<NewConversationView> {
  const senders = await listActiveSenders(db, tenantId);
  const sender = senders.find((s) => s.id === senderId) ?? senders[0];
  const templates = await senderTemplates(db, tenantId, sender);
  return { csrf, senders, sender, templates };
}
