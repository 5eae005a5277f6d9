import { sql } from "kysely";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import type { MessageFailure } from "../db/schema.ts";
import { unsent } from "../db/unsent.ts";
import { recordOutcomes } from "./record.ts";

/** A message not handed to the provider within its valid_for (DESIGN §13). */
export const EXPIRED: MessageFailure = {
  code: "expired",
  message: "The message was not handed to the provider within its valid_for, so it was not sent late.",
  retryable: false,
};

/**
 * The send claim fails an expired message when it takes it (src/outbound/send.ts); one nobody takes
 * (no send worker running, or held behind its pair) is failed here by the sweeper, so that its sender
 * learns it when it happens. Claimed first like a send (send_started_at stamped, SKIP LOCKED), so no
 * worker takes it meanwhile; then failed through the one send record (its event included). A message
 * whose attempt is in doubt is left to the claim. Returns how many were failed.
 */
export async function failExpiredMessages(deps: { db: Db; clock: Clock }, limit = 1000): Promise<number> {
  const now = deps.clock.now();
  const { rows } = await sql<{ id: string }>`
    UPDATE messages m SET send_started_at = ${now}, send_attempts = m.send_attempts + 1
    FROM (
      SELECT seq FROM messages e
      WHERE ${unsent("e")} AND e.status = 'accepted'
        AND e.expires_at <= ${now} AND e.send_started_at IS NULL
      ORDER BY e.seq
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    ) expired
    WHERE m.seq = expired.seq
    RETURNING m.id`.execute(deps.db);
  if (rows.length === 0) return 0;
  await recordOutcomes(
    deps.db,
    deps.clock,
    rows.map((row) => ({ id: row.id, failure: EXPIRED, refund: true })),
  );
  return rows.length;
}
