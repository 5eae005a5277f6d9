import { requireContact } from "../contacts/service.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import type { HistoryMessageRow } from "./presenter.ts";
import { findHistoryPosition, type HistoryPosition, listHistoryPage } from "./repository.ts";
import { HISTORY_LIMIT } from "./schemas.ts";

/** The page asked for; what is left out takes the API's defaults (oldest first, HISTORY_LIMIT). */
export interface HistoryRequest {
  order?: "asc" | "desc";
  limit?: number;
  before?: string;
}

/**
 * GET /contacts/{contact_id}/messages. `before` filters to messages strictly older than that message
 * of this contact; `order` and `limit` then take the first page of what remains. So `desc` with the
 * last item's id as `before` walks the whole history, newest first, without skips or repeats.
 */
export async function listContactHistory(
  db: Db,
  tenantId: string,
  contactId: string,
  request: HistoryRequest,
): Promise<{ rows: HistoryMessageRow[]; hasMore: boolean }> {
  const contact = await requireContact(db, tenantId, contactId);
  const before = await positionBefore(db, tenantId, contact.id, request.before, () => {
    return new ApiError("parameter_invalid", `before must be the id of a message of contact ${contact.id}.`, {
      param: "before",
    });
  });
  return listHistoryPage(db, {
    tenantId,
    contactId: contact.id,
    order: request.order ?? "asc",
    limit: request.limit ?? HISTORY_LIMIT.default,
    before,
  });
}

/**
 * Where a `before` message id sits in the contact's history: undefined when no `before` was given;
 * `missing()` is thrown when it is not the id of a message of that contact (each caller words it).
 */
export async function positionBefore(
  db: Db,
  tenantId: string,
  contactId: string,
  messageId: string | undefined,
  missing: () => ApiError,
): Promise<HistoryPosition | undefined> {
  if (messageId === undefined) return undefined;
  const position = isId(messageId, "msg")
    ? await findHistoryPosition(db, tenantId, contactId, messageId)
    : undefined;
  if (!position) throw missing();
  return position;
}
