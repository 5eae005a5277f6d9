import { contactIdentityOf, presentContactRef } from "../contacts/presenter.ts";
import { presentMessageFields } from "../history/presenter.ts";
import type { FeedRow } from "./repository.ts";

/**
 * SPEC §2 FeedMessage: a HistoryMessage with its contact, without `retrying`: the feed hands each
 * message out once, at an early moment (and an event's `data` is a snapshot), so a retry state it
 * showed would go stale unseen. GET /messages/{id} and history show the current one.
 */
export function presentFeedMessage(row: FeedRow) {
  return {
    object: "message" as const,
    ...presentMessageFields(row),
    contact: presentContactRef(contactIdentityOf(row)),
  };
}
