import type { RawBuilder } from "kysely";
import type { Db } from "./connect.ts";

/**
 * How long a table keeps its rows, declared by the feature that owns the table and applied by
 * `deleteExpired` (the maintenance worker): one home for the cutoff and the bounded loop.
 */
export interface Expiry {
  /** A row is kept this long past the time its `statement` compares with the cutoff. */
  keptMs: number;
  /** Rows one statement deletes at most. */
  batch: number;
  /** Deletes at most `batch` rows older than `cutoff`, by its own bounded sub-select. */
  statement: (cutoff: Date, batch: number) => RawBuilder<unknown>;
}

/**
 * Retention without a long transaction or a table-wide delete: the expiry's statement runs again
 * until it deletes fewer than a batch. Returns how many rows went.
 */
export async function deleteExpired(db: Db, now: Date, expiry: Expiry): Promise<number> {
  const cutoff = new Date(now.getTime() - expiry.keptMs);
  let deleted = 0;
  for (;;) {
    const count = Number((await expiry.statement(cutoff, expiry.batch).execute(db)).numAffectedRows ?? 0);
    deleted += count;
    if (count < expiry.batch) return deleted;
  }
}
