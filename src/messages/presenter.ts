import { CHANNEL } from "../channel/provider.ts";
import { epochSeconds } from "../clock.ts";
import type { MessageFailure } from "../db/schema.ts";
import { presentRetrying, type RetryStateRow } from "../history/presenter.ts";

/** What the accepting transaction stores in messages.content: the send worker's instructions. */
export type StoredContent =
  | { kind: "text"; body: string }
  | {
      kind: "template";
      template_id: string;
      template_name: string;
      language: string;
      components: Record<string, unknown>;
    };

export interface AcceptedMessage {
  id: string;
  senderId: string;
  contactId: string;
  /** E.164; null for a contact the provider knows by its BSUID only (DESIGN §14). */
  phone: string | null;
  content: StoredContent;
  clientReference: string | null;
  /** A scheduled send's time (it was accepted as `scheduled`). */
  sendAt: Date | null;
  validFor: number | null;
  createdAt: Date;
}

/**
 * SPEC §2 Message as POST /messages returns it. A replay presents the same object the first
 * request got (status `accepted`, or `scheduled` with a send_at), so both answers carry the same body.
 */
export function presentAcceptedMessage(message: AcceptedMessage) {
  return {
    object: "message" as const,
    id: message.id,
    status: (message.sendAt ? "scheduled" : "accepted") as string | null,
    direction: "outbound" as "outbound" | "inbound",
    channel: CHANNEL,
    sender: message.senderId,
    to: { object: "contact" as const, id: message.contactId, phone: message.phone },
    content:
      message.content.kind === "template"
        ? {
            kind: "template" as const,
            template: message.content.template_id,
            template_name: message.content.template_name,
            language: message.content.language,
          }
        : { kind: "text" as const, preview: message.content.body },
    created: epochSeconds(message.createdAt),
    client_reference: message.clientReference,
    send_at: message.sendAt ? epochSeconds(message.sendAt) : null,
    valid_for: message.validFor,
    failure: null as MessageFailure | null,
    // Answered before any attempt; GET /messages/{id} shows the retry state.
    retrying: null as ReturnType<typeof presentRetrying>,
  };
}

/** A stored message as GET /messages/{id} finds it (DESIGN §13): the Message, with its current status. */
export interface StoredMessageRow extends RetryStateRow {
  id: string;
  direction: "inbound" | "outbound";
  status: string | null;
  failure: MessageFailure | null;
  sender_id: string | null;
  content: Record<string, unknown> | null;
  preview: string;
  client_reference: string | null;
  send_at: Date | null;
  valid_for: number | null;
  created_at: Date;
  contact_id: string;
  contact_phone: string | null;
}

/** The message as it was accepted: a replay of its send answers with this (see presentAcceptedMessage). */
export function acceptedMessageOf(row: StoredMessageRow): AcceptedMessage {
  const content = row.content as StoredContent | null;
  return {
    id: row.id,
    senderId: row.sender_id ?? "",
    contactId: row.contact_id,
    phone: row.contact_phone,
    // An inbound message (or one stored before contents were kept) shows its text as a preview.
    content: row.direction === "outbound" && content ? content : { kind: "text", body: row.preview },
    clientReference: row.client_reference,
    sendAt: row.send_at,
    validFor: row.valid_for,
    createdAt: row.created_at,
  };
}

export function presentStoredMessage(row: StoredMessageRow) {
  return {
    ...presentAcceptedMessage(acceptedMessageOf(row)),
    direction: row.direction,
    status: row.direction === "inbound" ? null : row.status,
    failure: row.status === "failed" ? row.failure : null,
    retrying: presentRetrying(row),
  };
}
