import type { Selectable } from "kysely";
import { epochSeconds } from "../clock.ts";
import type { MessagesTable } from "../db/schema.ts";

/**
 * The columns of a messages row that history, conversations and the feed show, with the retry state
 * (issue 24): attempts so far (`send_attempts`), when the next is due (`send_not_before`), why the
 * last one failed (`last_error`).
 */
export type HistoryMessageRow = Pick<
  Selectable<MessagesTable>,
  | "id"
  | "direction"
  | "type"
  | "preview"
  | "text"
  | "media_type"
  | "media_filename"
  | "status"
  | "failure"
  | "client_reference"
  | "created_at"
  | "send_attempts"
  | "send_not_before"
  | "last_error"
>;

/** The columns a message's retry state is read from (a HistoryMessageRow has them). */
export type RetryStateRow = Pick<
  HistoryMessageRow,
  "direction" | "status" | "send_attempts" | "send_not_before" | "last_error"
>;

/**
 * `retrying` (issue 24): an `accepted` message whose last attempt failed and is to be tried again
 * (throttled, or a retryable provider failure): how many attempts were made (throttled ones and the
 * one under way included), when the next is due (Unix seconds; null while an attempt is under way),
 * and why the last one failed. Null otherwise: not tried yet or on its first attempt, sent, failed
 * for good (`failure`), canceled, scheduled, inbound. The send record (src/outbound/record.ts) writes
 * last_error with every retry and clears it once the message is sent, adopted or fails for good.
 */
export function presentRetrying(row: RetryStateRow) {
  if (row.direction !== "outbound" || row.status !== "accepted" || row.last_error === null) return null;
  return {
    attempts: row.send_attempts,
    next_attempt_at: row.send_not_before === null ? null : epochSeconds(row.send_not_before),
    last_error: row.last_error,
  };
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

/**
 * SPEC §2 HistoryMessage (GET /contacts/{contact_id}/messages), with `retrying`: history is read
 * for the current state. The feed and events show a message without it (presentFeedMessage).
 */
export function presentHistoryMessage(row: HistoryMessageRow) {
  return { object: "message" as const, ...presentMessageFields(row), retrying: presentRetrying(row) };
}
