import { sql } from "kysely";
import type { Db } from "../db/connect.ts";
import { EVENT_SCAN_ROWS, eventsInNextPositions } from "../events/repository.ts";
import type { Item } from "./delivery-window.ts";
import type { EndpointRow } from "./repository.ts";

/**
 * What a delivery run reads and writes in Postgres: the endpoint's `cursor_seq`, and past it the rows
 * of webhook_deliveries (events acknowledged out of order, or waiting for a retry).
 */

/**
 * Log positions one read of a delivery run examines at most, as GET /events?types= does. Unbounded,
 * the read of an endpoint filtering a rare type walked every position past its cursor (30 days of the
 * log, on every read of every run) to find its few events.
 */
export const RUN_SCAN_POSITIONS = EVENT_SCAN_ROWS;

/**
 * Up to `limit` of the endpoint's subscribed events not acknowledged, with their retry state, among
 * the next RUN_SCAN_POSITIONS positions after `afterSeq` (nextPositions: dense per tenant, the first
 * one retention kept onward). `examinedTo`: every such event up to it is in `rows` (the last row's
 * position when `limit` of them came, else the end of the range), so the next read starts there and
 * the cursor may move past it. `head`: the log's last position when the range was taken; every
 * position up to it is committed (eventsInNextPositions reads the range first).
 */
export async function unacknowledgedEvents(db: Db, endpoint: EndpointRow, afterSeq: number, limit: number) {
  const read = { afterSeq, positions: RUN_SCAN_POSITIONS, fetch: limit, types: endpoint.events ?? undefined };
  const { range, rows } = await eventsInNextPositions(db, endpoint.tenant_id, read, (entries) =>
    entries
      .leftJoin("webhook_deliveries as d", (join) =>
        join.on("d.endpoint_id", "=", endpoint.id).onRef("d.seq", "=", "events.seq"),
      )
      .select(["d.attempts", "d.first_failed_at", "d.next_attempt_at"])
      .where((eb) => eb.or([eb("d.acknowledged", "is", null), eb("d.acknowledged", "=", false)])),
  );
  const last = rows.at(-1);
  const examinedTo = rows.length < limit ? Math.max(afterSeq, range.to_seq) : (last?.event_seq ?? afterSeq);
  return { rows, examinedTo, head: range.head };
}

/** A run's progress, as written. */
export interface Progress {
  /** The cursor the endpoint had, and the one it moves to. */
  fromCursor: number;
  cursor: number;
  /** Events past the new cursor whose state changed. */
  items: Item[];
  retryAt: Date | null;
  pausedUntil: Date | null;
  /**
   * The endpoint is back (endpoint-run.ts, `recover`): the events past this position waiting for a
   * retry are due now. Their attempts and first failure stay.
   */
  releaseAfter?: number;
  /**
   * The endpoint's last success and failure, and whether to disable it: read once the transaction
   * has begun, so that an attempt that ended meanwhile is written too.
   */
  health(): {
    lastSuccessAt: Date | undefined;
    lastFailure: { at: Date; status: number | null; error: string } | undefined;
    disable: "failing" | "gone" | undefined;
  };
}

/**
 * Writes a run's progress in one transaction: the cursor, what was acknowledged past it, what waits
 * for a retry (and, after a recovery, what waits no longer), the last success and failure, when to try again. Guarded by the endpoint's generation
 * and the run's lease: returns the endpoint as written, or undefined when it changed (nothing written).
 */
export function writeProgress(
  db: Db,
  endpoint: { id: string; generation: number; lease: string },
  progress: Progress,
): Promise<EndpointRow | undefined> {
  const { cursor, items } = progress;
  return db.transaction().execute(async (trx) => {
    const { lastSuccessAt, lastFailure, disable } = progress.health();
    const row = await trx
      .updateTable("webhook_endpoints")
      .set({
        cursor_seq: cursor,
        retry_at: progress.retryAt,
        paused_until: progress.pausedUntil,
        ...(lastSuccessAt && { last_success_at: lastSuccessAt }),
        ...(lastFailure && {
          last_failure_at: lastFailure.at,
          last_failure_status: lastFailure.status,
          last_failure_error: lastFailure.error,
        }),
        ...(disable && { status: "disabled" as const, disabled_reason: disable }),
      })
      .where("id", "=", endpoint.id)
      .where("generation", "=", endpoint.generation)
      .where("lease", "=", endpoint.lease)
      .where("status", "=", "enabled")
      .returningAll()
      .executeTakeFirst();
    if (!row) return undefined;
    // Before the run's own changes below: an event it failed again since keeps its new wait.
    if (progress.releaseAfter !== undefined) {
      await trx
        .updateTable("webhook_deliveries")
        .set({ next_attempt_at: null })
        .where("endpoint_id", "=", endpoint.id)
        .where("seq", ">", progress.releaseAfter)
        .where("acknowledged", "=", false)
        .where("next_attempt_at", "is not", null)
        .execute();
    }
    if (items.length > 0) {
      await sql`
        INSERT INTO webhook_deliveries AS d
          (endpoint_id, seq, acknowledged, attempts, first_failed_at, next_attempt_at)
        SELECT ${endpoint.id}, * FROM unnest(
          ${items.map((item) => item.seq)}::bigint[],
          ${items.map((item) => item.state === "acked")}::boolean[],
          ${items.map((item) => item.attempts)}::int[],
          ${items.map((item) => item.firstFailedAt?.toISOString() ?? null)}::timestamptz[],
          ${items.map((item) => item.nextAttemptAt?.toISOString() ?? null)}::timestamptz[])
        ON CONFLICT (endpoint_id, seq) DO UPDATE SET
          acknowledged = excluded.acknowledged, attempts = excluded.attempts,
          first_failed_at = excluded.first_failed_at, next_attempt_at = excluded.next_attempt_at`.execute(
        trx,
      );
    }
    if (cursor > progress.fromCursor) {
      await trx
        .deleteFrom("webhook_deliveries")
        .where("endpoint_id", "=", endpoint.id)
        .where("seq", "<=", cursor)
        .execute();
    }
    return row;
  });
}
