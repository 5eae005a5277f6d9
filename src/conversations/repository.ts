import { WINDOW_MS } from "../contacts/messaging-state.ts";
import { CONTACT_IDENTITY_COLUMNS, type ContactIdentityRow } from "../contacts/repository.ts";
import type { Db } from "../db/connect.ts";
import type { HistoryMessageRow } from "../history/presenter.ts";
import { HISTORY_COLUMNS } from "../history/repository.ts";

export interface ConversationRow extends HistoryMessageRow, ContactIdentityRow {
  contact_name: string | null;
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
  /** The panel's narrowing (GET /v2/conversations passes none). */
  narrow?: ConversationNarrowing;
}

/**
 * What the panel's list can be narrowed to: one filter, and a search of the contact by name,
 * username, BSUID or phone. `unread` reads the summary row, `failed` the joined last message, `open` the contact's
 * window (`now` decides it, as messagingState does) and opt-out.
 */
export interface ConversationNarrowing {
  filter?: "unread" | "open" | "failed";
  /** Part of the contact's name, username or BSUID, any case. */
  name?: string;
  /** One contact's conversation (the panel's open one, pinned beside a list that leaves it out). */
  contactId?: string;
  /** A whole E.164 number: the contact with it (the (tenant_id, channel, phone) unique index). */
  phone?: string;
  /** Digits somewhere in the contact's E.164 phone number, or in its BSUID (`DE.` and digits). */
  phoneDigits?: string;
  now: Date;
}

/** A LIKE pattern that matches `text` literally anywhere (`\` is Postgres's default LIKE escape). */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
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
      ...CONTACT_IDENTITY_COLUMNS,
      "contacts.name as contact_name",
      "contacts.channel as contact_channel",
      "contacts.last_inbound_at as contact_last_inbound_at",
      "contacts.opted_out_at as contact_opted_out_at",
      "conversations.unread",
      "conversations.last_message_at",
    ])
    .where("conversations.tenant_id", "=", query.tenantId)
    .$if(before !== undefined, (qb) => qb.where("conversations.last_message_at", "<", before!))
    .$if(query.narrow?.filter === "unread", (qb) => qb.where("conversations.unread", ">", 0))
    .$if(query.narrow?.filter === "failed", (qb) => qb.where("messages.status", "=", "failed"))
    .$if(query.narrow?.filter === "open", (qb) =>
      qb
        .where("contacts.last_inbound_at", ">", new Date(query.narrow!.now.getTime() - WINDOW_MS))
        .where("contacts.opted_out_at", "is", null),
    )
    .$if(query.narrow?.name !== undefined, (qb) =>
      qb.where((eb) => {
        const pattern = containsPattern(query.narrow!.name!);
        // A customer without a phone is found by their username or BSUID too (DESIGN §14).
        return eb.or([
          eb("contacts.name", "ilike", pattern),
          eb("contacts.username", "ilike", pattern),
          eb("contacts.user_id", "ilike", pattern),
        ]);
      }),
    )
    .$if(query.narrow?.contactId !== undefined, (qb) =>
      qb.where("conversations.contact_id", "=", query.narrow!.contactId!),
    )
    .$if(query.narrow?.phone !== undefined, (qb) =>
      qb.where("contacts.channel", "=", "whatsapp").where("contacts.phone", "=", query.narrow!.phone!),
    )
    .$if(query.narrow?.phoneDigits !== undefined, (qb) =>
      qb.where((eb) => {
        const pattern = containsPattern(query.narrow!.phoneDigits!);
        return eb.or([eb("contacts.phone", "like", pattern), eb("contacts.user_id", "like", pattern)]);
      }),
    )
    .orderBy("conversations.last_message_at", query.order)
    .orderBy("conversations.last_message_seq", query.order)
    .limit(query.fetch)
    .execute();
}
