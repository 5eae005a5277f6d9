import { epochSeconds } from "../clock.ts";
import type { MessageFailure } from "../db/schema.ts";

/** The columns of a messages row that history, conversations and the feed show. */
export interface HistoryMessageRow {
  id: string | null;
  direction: "inbound" | "outbound";
  type: string;
  preview: string;
  text: string | null;
  media_type: string | null;
  media_filename: string | null;
  status: string | null;
  failure: MessageFailure | null;
  client_reference: string | null;
  created_at: Date;
}

/**
 * The fields every view of a stored message shares (SPEC §2 HistoryMessage without `object`; a
 * Conversation's `last_message` is exactly this). `failure` is always present: the provider's reason
 * on a failed outbound message, null otherwise (DESIGN §3).
 */
export function presentMessageFields(row: HistoryMessageRow) {
  return {
    id: row.id,
    direction: row.direction,
    type: row.type,
    preview: row.preview,
    // SPEC: null, not "", when there is no real text.
    text: row.text === "" ? null : row.text,
    media: row.media_type === null ? null : { type: row.media_type, filename: row.media_filename },
    status: row.direction === "inbound" ? null : row.status,
    // A failed message that was later delivered keeps no stale reason.
    failure: row.status === "failed" ? row.failure : null,
    client_reference: row.client_reference,
    created: epochSeconds(row.created_at),
  };
}

/** SPEC §2 HistoryMessage (GET /contacts/{contact_id}/messages). */
export function presentHistoryMessage(row: HistoryMessageRow) {
  return { object: "message" as const, ...presentMessageFields(row) };
}
