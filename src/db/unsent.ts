import { type RawBuilder, type SqlBool, sql } from "kysely";

/**
 * An outbound message not yet handed to the provider, in the terms of the partial index that finds
 * such messages (`messages_unsent_pair_idx`, sql/019): no provider id, no failure, not parked
 * (scheduled or canceled). That is status `accepted` (the one state with none of them), but `status` itself is in no index, so
 * status webhooks update a message in place. Queries that look for unsent messages say this (and
 * may say `status = 'accepted'` too), so that the planner can use that index.
 */
export function unsent(alias: string): RawBuilder<SqlBool> {
  if (!/^[a-z_]+$/.test(alias)) throw new Error(`not a table alias: ${alias}`);
  return sql<SqlBool>`${sql.raw(
    `${alias}.direction = 'outbound' AND ${alias}.provider_message_id IS NULL AND ${alias}.failure IS NULL AND ${alias}.parked IS NULL`,
  )}`;
}
