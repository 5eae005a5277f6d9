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
import type { EventType, MessageFailure } from "../db/schema.ts";
import type { HistoryMessageRow } from "../history/presenter.ts";
import { HISTORY_COLUMNS, SYSTEM_TYPE_PATTERN } from "../history/repository.ts";
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
 * national form is dropped). Anything else is part of a name, any case (ILIKE over the tenant's
 * contacts: fine for the hundreds or thousands a tenant has; a trigram index would be the next step).
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
 * A message as the conversation shows it: what history shows, and what the panel adds (issue 24):
 * the template it was sent from, the retry state (the send record's attempts, when the next is due
 * and the error of the last one, sql/020), and its last change.
 */
export interface ThreadMessageRow extends HistoryMessageRow {
  /** A received message whose media the provider can be asked for (sql/023): the panel links it. */
  has_media: boolean;
  template_name: string | null;
  template_language: string | null;
  send_at: Date | null;
  updated_at: Date;
}

/** History's columns (the retry state among them) and the template and times the panel shows. */
const THREAD_COLUMNS = [
  ...HISTORY_COLUMNS,
  sql<boolean>`messages.media_id IS NOT NULL`.as("has_media"),
  sql<string | null>`messages.content->>'template_name'`.as("template_name"),
  sql<string | null>`messages.content->>'language'`.as("template_language"),
  "messages.send_at",
  "messages.updated_at",
] as const;

export interface ThreadPage {
  /** Oldest first. */
  rows: ThreadMessageRow[];
  /** Whether messages older than the first row exist. */
  hasEarlier: boolean;
}

/**
 * The latest messages of a contact (or those before `beforeId`), oldest first: history's page
 * (GET /contacts/{id}/messages: same order, same system-message rule) with the panel's columns.
 */
export async function threadPage(
  db: Db,
  tenantId: string,
  contactId: string,
  beforeId: string | undefined,
): Promise<ThreadPage> {
  const before = await positionBefore(db, tenantId, contactId, beforeId, () => {
    return new ApiError("resource_missing", "No such message in this conversation.");
  });
  const rows = await db
    .selectFrom("messages")
    .select(THREAD_COLUMNS)
    .where("messages.tenant_id", "=", tenantId)
    .where("messages.contact_id", "=", contactId)
    .where("messages.type", "not like", SYSTEM_TYPE_PATTERN)
    .$if(before !== undefined, (qb) =>
      qb.where((eb) =>
        eb(
          eb.refTuple("messages.created_at", "messages.seq"),
          "<",
          eb.tuple(before!.created_at, before!.seq),
        ),
      ),
    )
    .orderBy("messages.created_at", "desc")
    .orderBy("messages.seq", "desc")
    .limit(THREAD_PAGE_SIZE + 1)
    .execute();
  return { rows: rows.slice(0, THREAD_PAGE_SIZE).reverse(), hasEarlier: rows.length > THREAD_PAGE_SIZE };
}

/** One step of a message's timeline: a status and when the service recorded it. */
export interface StatusStep {
  status: string;
  at: Date;
  failure: MessageFailure | null;
}

export interface MessageDetails {
  message: ThreadMessageRow;
  /**
   * The statuses the event log (DESIGN §12) recorded for it, oldest first: `events.created_at` is
   * when the service recorded the change (the provider's own timestamps are not kept: status events
   * are deleted once applied, sql/011). Empty when the log no longer has them (30 days).
   */
  steps: StatusStep[];
}

const STEP_OF_EVENT: Partial<Record<EventType, string>> = {
  "message.sent": "sent",
  "message.delivered": "delivered",
  "message.read": "read",
  "message.failed": "failed",
  "message.canceled": "canceled",
};

/** A message's statuses live at most this long after it was created (the event log's retention). */
const EVENT_HORIZON_MS = 31 * 86_400_000;
/** The message's created_at and the log's clock_timestamp come from different clocks. */
const CLOCK_SLACK_MS = 5 * 60_000;

/**
 * One message of the contact with its timeline (the details disclosure, loaded when opened). The
 * event log has no index by message: the lookup is bounded by the tenant and by the time from the
 * message's creation to the log's retention (events_created_idx), and made for one message at a
 * time, when a person asks.
 */
export async function messageDetails(
  db: Db,
  tenantId: string,
  contactId: string,
  messageId: string,
): Promise<MessageDetails> {
  const message = isId(messageId, "msg")
    ? await db
        .selectFrom("messages")
        .select(THREAD_COLUMNS)
        .where("messages.tenant_id", "=", tenantId)
        .where("messages.contact_id", "=", contactId)
        .where("messages.id", "=", messageId)
        .executeTakeFirst()
    : undefined;
  if (!message) throw new ApiError("resource_missing", "No such message in this conversation.");
  if (message.direction === "inbound") return { message, steps: [] };
  const from = message.created_at.getTime() - CLOCK_SLACK_MS;
  // A scheduled message is sent at send_at (up to 30 days on): its statuses come after that.
  const until = Math.max(message.created_at.getTime(), message.send_at?.getTime() ?? 0) + EVENT_HORIZON_MS;
  const events = await db
    .selectFrom("events")
    .select(["type", "failure", "created_at"])
    .where("tenant_id", "=", tenantId)
    .where("message_id", "=", messageId)
    .where("created_at", ">=", new Date(from))
    .where("created_at", "<", new Date(until))
    .orderBy("seq")
    .limit(20)
    .execute();
  const steps: StatusStep[] = [];
  for (const event of events) {
    const status = STEP_OF_EVENT[event.type];
    if (status) steps.push({ status, at: event.created_at, failure: event.failure });
  }
  return { message, steps };
}

/** A received message's media as the provider knows it, and the sender whose token fetches it. */
export interface InboundMediaSource {
  mediaId: string;
  mediaType: string | null;
  mediaFilename: string | null;
  sender: Pick<SenderRow, "id" | "provider_phone_number_id" | "waba_id" | "access_token">;
}

/**
 * The media of one received message of the contact, in the tenant (another tenant's message, a
 * send, or a message without media is the same 404 as an unknown id), with its receiving sender.
 */
export async function inboundMediaSource(
  db: Db,
  tenantId: string,
  contactId: string,
  messageId: string,
): Promise<InboundMediaSource> {
  const row = isId(messageId, "msg")
    ? await db
        .selectFrom("messages")
        .innerJoin("senders", (join) =>
          join
            .onRef("senders.id", "=", "messages.sender_id")
            .onRef("senders.tenant_id", "=", "messages.tenant_id"),
        )
        .select([
          "messages.media_id",
          "messages.media_type",
          "messages.media_filename",
          "senders.id as sender_id",
          "senders.provider_phone_number_id",
          "senders.waba_id",
          "senders.access_token",
        ])
        .where("messages.tenant_id", "=", tenantId)
        .where("messages.contact_id", "=", contactId)
        .where("messages.id", "=", messageId)
        .where("messages.direction", "=", "inbound")
        .where("messages.media_id", "is not", null)
        .executeTakeFirst()
    : undefined;
  if (!row?.media_id) throw new ApiError("resource_missing", "No such media in this conversation.");
  return {
    mediaId: row.media_id,
    mediaType: row.media_type,
    mediaFilename: row.media_filename,
    sender: {
      id: row.sender_id,
      provider_phone_number_id: row.provider_phone_number_id,
      waba_id: row.waba_id,
      access_token: row.access_token,
    },
  };
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
