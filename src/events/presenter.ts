import { epochSeconds } from "../clock.ts";
import { presentFeedMessage } from "../feed/presenter.ts";
import type { EventRow } from "./repository.ts";

/** An Event (DESIGN §12): the message as the feed shows it, with the status and failure it left. */
export function presentEvent(row: EventRow) {
  const asLeft =
    row.event_type === "message.received"
      ? row
      : { ...row, status: row.event_status, failure: row.event_failure };
  return {
    object: "event" as const,
    id: row.event_id,
    type: row.event_type,
    created: epochSeconds(row.event_created_at),
    data: presentFeedMessage(asLeft as EventRow),
  };
}
