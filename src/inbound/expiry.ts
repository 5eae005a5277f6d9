import { sql } from "kysely";
import { DAY_MS } from "../clock.ts";
import type { Expiry } from "../db/batched-delete.ts";

/**
 * A finalized inbound event (the provider's payload) is kept a week: the provider retries a webhook
 * for up to seven days, and a retry must find it to be a duplicate. Its message keeps what it said.
 * An unfinalized one is never dropped (the sweeper finishes it).
 */
export const INBOUND_EVENT_EXPIRY: Expiry = {
  keptMs: 7 * DAY_MS,
  batch: 10_000,
  // Oldest first, by inbound_events_finalized_idx.
  statement: (cutoff, batch) => sql`
    DELETE FROM inbound_events WHERE provider_message_id = ANY(ARRAY(
      SELECT provider_message_id FROM inbound_events
      WHERE finalized_at IS NOT NULL AND received_at < ${cutoff}
      ORDER BY received_at LIMIT ${batch}
    ))`,
};
