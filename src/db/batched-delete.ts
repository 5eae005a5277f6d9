import type { RawBuilder } from "kysely";
import type { Db } from "./connect.ts";

/**
 * Retention without a long transaction or a table-wide delete: `statement(batch)` deletes at most
 * `batch` rows (its own bounded sub-select), and runs again until it deletes fewer. Returns the total.
 */
export async function deleteInBatches(
  db: Db,
  batch: number,
  statement: (batch: number) => RawBuilder<unknown>,
): Promise<number> {
  let deleted = 0;
  for (;;) {
    const count = Number((await statement(batch).execute(db)).numAffectedRows ?? 0);
    deleted += count;
    if (count < batch) return deleted;
  }
}
