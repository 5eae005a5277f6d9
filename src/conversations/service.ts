import { epochSeconds } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { type ConversationNarrowing, type ConversationRow, listConversationRows } from "./repository.ts";
import { CONVERSATIONS_LIMIT } from "./schemas.ts";

/** The page asked for; what is left out takes the API's defaults (newest first, CONVERSATIONS_LIMIT). */
export interface ConversationsRequest {
  order?: "asc" | "desc";
  limit?: number;
  /** Unix epoch seconds. */
  before?: number;
  /** The panel's filter and search (the API has none). */
  narrow?: ConversationNarrowing;
}

/**
 * GET /conversations, ordered by last message. `before` is whole seconds, so a newest-first page
 * that would end partway through one second stops before that second instead: the next page
 * (`before` = the last item's `created`) then starts with all of it, and nothing is skipped. Only a
 * page that is a single second throughout is cut as it stands.
 */
export async function listConversations(
  db: Db,
  tenantId: string,
  request: ConversationsRequest,
): Promise<{ rows: ConversationRow[]; hasMore: boolean }> {
  const { order = "desc", limit = CONVERSATIONS_LIMIT.default } = request;
  const fetched = await listConversationRows(db, {
    tenantId,
    order,
    fetch: limit + 1,
    before: request.before === undefined ? undefined : new Date(request.before * 1000),
    narrow: request.narrow,
  });
  const hasMore = fetched.length > limit;
  let rows = fetched.slice(0, limit);
  const firstLeftOut = fetched[limit];
  if (hasMore && firstLeftOut && order === "desc") {
    const splitSecond = epochSeconds(firstLeftOut.last_message_at);
    const whole = rows.filter((row) => epochSeconds(row.last_message_at) !== splitSecond);
    if (whole.length > 0) rows = whole;
  }
  return { rows, hasMore };
}
