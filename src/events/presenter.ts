import { epochSeconds } from "../clock.ts";
import { contactIdentityOf, presentContactSummary } from "../contacts/presenter.ts";
import { presentFeedMessage } from "../feed/presenter.ts";
import type { EventRow } from "./repository.ts";

/**
 * An Event (DESIGN §12): the message as the feed shows it, with the status and failure it left; a
 * contact.merged event (§14) carries `{survivor, merged}` instead.
 */
export function presentEvent(row: EventRow) {
  if (row.event_type === "contact.merged") {
    // DESIGN §14: the survivor as it is now, and every contact id merged into it.
    const contact = { ...contactIdentityOf(row), name: row.contact_name, channel: row.contact_channel };
    return {
      object: "event" as const,
      id: row.event_id,
      type: row.event_type,
      created: epochSeconds(row.event_created_at),
      data: { survivor: presentContactSummary(contact), merged: row.event_data?.merged ?? [] },
    };
  }
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
