import { presentContactRef } from "../contacts/presenter.ts";
import { presentHistoryMessage } from "../history/presenter.ts";
import type { FeedRow } from "./repository.ts";

/** SPEC §2 FeedMessage: a HistoryMessage with its contact. */
export function presentFeedMessage(row: FeedRow) {
  return {
    ...presentHistoryMessage(row),
    contact: presentContactRef({ id: row.contact_id, phone: row.contact_phone }),
  };
}
