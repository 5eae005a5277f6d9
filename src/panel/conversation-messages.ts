import { sql } from "kysely";
import type { Db } from "../db/connect.ts";
import type { EventType, MessageFailure } from "../db/schema.ts";
import type { HistoryMessageRow } from "../history/presenter.ts";
import { HISTORY_COLUMNS, historyQuery } from "../history/repository.ts";
import { positionBefore } from "../history/service.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import type { SenderRow } from "../senders/repository.ts";

/** What a conversation's pages read of its messages: the thread, one message's timeline, received media. */

/** Messages shown at once in a conversation; older ones are behind "Earlier messages". */
export const THREAD_PAGE_SIZE = 100;

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
  const rows = await historyQuery(db, { tenantId, contactId, order: "desc", limit: THREAD_PAGE_SIZE, before })
    .select(THREAD_COLUMNS)
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

/** One message of the contact in the tenant, by its id (a caller checks the id's form first). */
function contactMessage(db: Db, tenantId: string, contactId: string, messageId: string) {
  return db
    .selectFrom("messages")
    .where("messages.tenant_id", "=", tenantId)
    .where("messages.contact_id", "=", contactId)
    .where("messages.id", "=", messageId);
}

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
    ? await contactMessage(db, tenantId, contactId, messageId).select(THREAD_COLUMNS).executeTakeFirst()
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
    ? await contactMessage(db, tenantId, contactId, messageId)
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
