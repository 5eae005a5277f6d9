import { sql } from "kysely";
import { deleteInBatches } from "../db/batched-delete.ts";
import type { Db } from "../db/connect.ts";

/**
 * A finalized inbound event (the provider's payload) is kept a week: the provider retries a webhook
 * for up to seven days, and a retry must find it to be a duplicate. Its message keeps what it said.
 * An unfinalized one is never dropped (the sweeper finishes it).
 */
export const INBOUND_EVENT_RETENTION_MS = 7 * 86_400_000;

/** Maintenance: finalized inbound events past the week, oldest first (inbound_events_finalized_idx). */
export function deleteExpiredInboundEvents(db: Db, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - INBOUND_EVENT_RETENTION_MS);
  return deleteInBatches(
    db,
    10_000,
    (batch) => sql`
      DELETE FROM inbound_events WHERE provider_message_id = ANY(ARRAY(
        SELECT provider_message_id FROM inbound_events
        WHERE finalized_at IS NOT NULL AND received_at < ${cutoff}
        ORDER BY received_at LIMIT ${batch}
      ))`,
  );
}
