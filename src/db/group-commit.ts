import { isDependencyDown } from "../http/dependency-faults.ts";
import type { Logger } from "../logger.ts";

/**
 * Group commit: callers submit one item each and wait; whatever arrives while a transaction runs
 * goes into the next one, so under load a transaction carries many callers' items, and alone a
 * caller commits at once with no added wait. `commit` writes a batch in one transaction and
 * answers one result per item, in order; `afterCommit` runs once per committed batch (queue
 * nudges) before the callers are answered.
 */
export interface GroupCommitOptions<I, O> {
  name: string;
  logger: Logger;
  commit(items: I[]): Promise<O[]>;
  afterCommit?(items: I[], results: O[]): Promise<void>;
  maxBatch?: number;
  /** Transactions in flight at once: one gathers while others commit. */
  parallel?: number;
}

export interface GroupCommitStats {
  /** Batches committed (transactions, counting the single-item retries of a failed batch). */
  batches: number;
  items: number;
}

export interface GroupCommit<I, O> {
  submit(item: I): Promise<O>;
  readonly stats: GroupCommitStats;
}

interface Waiting<I, O> {
  item: I;
  resolve(result: O): void;
  reject(error: unknown): void;
}

export function createGroupCommit<I, O>(options: GroupCommitOptions<I, O>): GroupCommit<I, O> {
  const { name, logger, maxBatch = 250, parallel = 3 } = options;
  const stats: GroupCommitStats = { batches: 0, items: 0 };
  const waiting: Waiting<I, O>[] = [];
  let draining = 0;

  async function commit(batch: Waiting<I, O>[]) {
    const items = batch.map((w) => w.item);
    const results = await options.commit(items);
    stats.batches++;
    stats.items += batch.length;
    // Committed is committed: a failure after this point must not send the batch round again.
    await options
      .afterCommit?.(items, results)
      .catch((error: Error) =>
        logger.warn({ batcher: name, err: error.message }, "after-commit step failed; the sweeper covers it"),
      );
    for (const [i, w] of batch.entries()) w.resolve(results[i]!);
  }

  async function drain() {
    while (waiting.length > 0) {
      const batch = waiting.splice(0, maxBatch);
      try {
        await commit(batch);
      } catch (error) {
        // Postgres away fails every item alike, and a commit cut off mid-way may have happened:
        // each caller gets the error (a 503) and its client retries.
        if (batch.length === 1 || isDependencyDown(error)) {
          for (const w of batch) w.reject(error);
          continue;
        }
        // One bad item must not fail its neighbours: commit them one by one.
        logger.warn(
          { batcher: name, size: batch.length, err: (error as Error).message },
          "batch failed; committing items singly",
        );
        for (const single of batch) await commit([single]).catch((e: unknown) => single.reject(e));
      }
    }
    draining--;
  }

  return {
    stats,
    submit(item: I): Promise<O> {
      return new Promise((resolve, reject) => {
        waiting.push({ item, resolve, reject });
        if (draining < parallel) {
          draining++;
          // Callers arriving in the same tick share the transaction too.
          queueMicrotask(() => void drain());
        }
      });
    },
  };
}
