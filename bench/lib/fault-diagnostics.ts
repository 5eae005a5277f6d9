import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { Queue } from "bullmq";
import { sql } from "kysely";
import type { Db } from "../../src/db/connect.ts";
import { withTimeout } from "../../src/lib/with-timeout.ts";
import { drainNudgeOptions } from "../../src/queues/drain-nudge.ts";
import { queuePrefix } from "../../src/queues/index.ts";
import { createRedis, type RedisTarget } from "../../src/redis/connect.ts";

/**
 * What a failed fault scenario leaves to read in its own output: CI keeps only the printed log, not
 * the run's folder, so a failure that does not show again on the next machine must explain itself
 * the first time.
 */

/** Each process log's size now: the lines a scenario adds are the ones after these marks. */
export function markLogs(logDir: string): Map<string, number> {
  const marks = new Map<string, number>();
  for (const file of readdirSync(logDir)) marks.set(file, statSync(join(logDir, file)).size);
  return marks;
}

const LINES_PER_PROCESS = 12;
const LINE_CHARS = 320;

/**
 * The warnings and errors each process logged since `marks` (pino level 40 and up, and any line
 * that is not JSON: a stack trace, a runtime's own message), the last few of each, in its order.
 */
export function newWarnings(logDir: string, marks: Map<string, number>): string[] {
  const out: string[] = [];
  for (const file of readdirSync(logDir).sort()) {
    const from = marks.get(file) ?? 0;
    const text = readFileSync(join(logDir, file)).subarray(from).toString("utf8");
    const lines = text.split("\n").filter((line) => {
      if (line.trim() === "") return false;
      if (!line.startsWith("{")) return true;
      const level = /"level":(\d+)/.exec(line)?.[1];
      return level !== undefined && Number(level) >= 40;
    });
    if (lines.length === 0) continue;
    const name = file.replace(/\.log$/, "");
    out.push(
      `${name}: ${lines.length} warning(s) or error(s)${lines.length > LINES_PER_PROCESS ? ", the last ones:" : ":"}`,
    );
    for (const line of lines.slice(-LINES_PER_PROCESS)) out.push(`  ${line.slice(0, LINE_CHARS)}`);
  }
  return out;
}

/**
 * Why an endpoint's events did not arrive: its row (position against the log's head, lease, retry,
 * pause), and in Redis its nudge (the deduplication key and the state of the job it names) and the
 * webhook queue's counts. Each Redis read is bounded: the thing being diagnosed may be a Redis that
 * does not answer.
 */
export async function describeEndpointBacklog(
  db: Db,
  redis: RedisTarget | string,
  redisPrefix: string,
  endpointId: string,
): Promise<string[]> {
  const out: string[] = [];
  const row = await sql<Record<string, unknown>>`
    SELECT w.status, w.cursor_seq, h.last_seq AS head_seq, w.retry_at, w.paused_until, w.generation,
           w.lease, w.last_success_at, w.last_failure_at,
           (SELECT count(*) FROM webhook_deliveries d WHERE d.endpoint_id = w.id AND NOT d.acknowledged)::int
             AS unacknowledged_rows
    FROM webhook_endpoints w LEFT JOIN event_heads h ON h.tenant_id = w.tenant_id
    WHERE w.id = ${endpointId}`
    .execute(db)
    .then((result) => result.rows[0])
    .catch((error: Error) => ({ error: error.message }));
  out.push(`endpoint ${endpointId}: ${JSON.stringify(row ?? "missing")}`);

  const prefix = queuePrefix(redisPrefix, "webhook");
  const connection = createRedis(redis, { forQueues: true, connectionName: "faults-diagnostics" });
  const queue = new Queue("webhook", { connection, prefix });
  try {
    const counts = await withTimeout(queue.getJobCounts(), 5000);
    out.push(`webhook queue: ${JSON.stringify(counts)}`);
    const deduplicationId = drainNudgeOptions("webhook", undefined, endpointId).deduplication?.id;
    const nudgeId = await withTimeout(queue.getDeduplicationJobId(String(deduplicationId)), 5000);
    const state = nudgeId ? await withTimeout(queue.getJobState(nudgeId), 5000) : "none";
    out.push(`its nudge (${deduplicationId}): job ${nudgeId ?? "none"}, ${state}`);
    const active = await withTimeout(queue.getJobs(["active"], 0, 20), 5000);
    for (const job of active) {
      out.push(
        `active job ${job.id} (${job.name}, ${JSON.stringify(job.data)}): started ${job.processedOn ? `${((Date.now() - job.processedOn) / 1000).toFixed(1)} s ago` : "never"}, attempts ${job.attemptsMade}`,
      );
    }
  } catch (error) {
    out.push(`webhook queue: not read (${(error as Error).message})`);
  } finally {
    await withTimeout(queue.close(), 5000).catch(() => {});
    connection.disconnect();
  }
  return out;
}
