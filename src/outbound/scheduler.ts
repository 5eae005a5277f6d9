import { sql } from "kysely";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { nudgeSends, type Queues } from "../queues/index.ts";

/**
 * Scheduled sends (DESIGN §13) live in Postgres, not in delayed Redis jobs: a message accepted with
 * a `send_at` is stored `scheduled` and parked (sql/019). Every send worker runs this loop; a tick
 * moves the due ones into delivery (status `accepted`, unparked, one statement, SKIP LOCKED so that
 * workers share the work and none moves a message twice) and nudges the send jobs for them. A
 * nudge lost with Redis or a worker killed between the two is the sweeper's: it finds accepted
 * messages nobody took. So neither a Redis restart nor a killed worker loses or doubles a message;
 * whatever becomes due at once goes out at its sender's pace (the send worker's token bucket).
 */

export interface SchedulerDeps {
  db: Db;
  queues: Pick<Queues, "send">;
  clock: Clock;
  config: { workers: { sendRetryBaseMs: number } };
}

/** Messages moved into delivery by one statement; a tick goes on while a statement moves this many. */
const PROMOTE_BATCH = 5000;
/** Ids per send job (the send worker claims a job's messages in one statement). */
const JOB_SIZE = 500;

/** One tick: every due scheduled message into delivery, the send jobs nudged. Returns how many. */
export async function releaseDueMessages(deps: SchedulerDeps): Promise<number> {
  let released = 0;
  for (;;) {
    const now = deps.clock.now();
    const { rows } = await sql<{ id: string; seq: string }>`
      UPDATE messages m SET parked = NULL, status = 'accepted', updated_at = ${now}
      FROM (
        SELECT seq FROM messages
        WHERE parked = 'scheduled' AND send_at <= ${now}
        ORDER BY send_at, seq
        LIMIT ${PROMOTE_BATCH}
        FOR UPDATE SKIP LOCKED
      ) due
      WHERE m.seq = due.seq AND m.parked = 'scheduled'
      RETURNING m.id, m.seq`.execute(deps.db);
    if (rows.length === 0) return released;
    // In seq order, so that a job's messages to one contact are claimed in the order they were sent.
    const ids = rows.sort((a, b) => Number(a.seq) - Number(b.seq)).map((r) => r.id);
    await nudgeSends(deps.queues.send, ids, deps.config.workers.sendRetryBaseMs, {
      chunk: JOB_SIZE,
      jobId: (chunk) => `s-${chunk[0]}`,
    });
    released += rows.length;
    if (rows.length < PROMOTE_BATCH) return released;
  }
}
