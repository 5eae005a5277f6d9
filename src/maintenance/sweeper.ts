import type { JobsOptions, Queue } from "bullmq";
import { sql } from "kysely";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { unsent as isUnsent } from "../db/unsent.ts";
import type { Logger } from "../logger.ts";
import { adoptProviderId } from "../outbound/claim.ts";
import { failExpiredMessages } from "../outbound/expire.ts";
import { providerIdStash } from "../outbound/stash.ts";
import { endpointsDue } from "../push/repository.ts";
import { nudgeEndpoint } from "../push/service.ts";
import { nudgeDrain } from "../queues/drain-nudge.ts";
import { jobIdFor, nudgeSends, type Queues } from "../queues/index.ts";
import type { RedisClient } from "../redis/connect.ts";

/**
 * Postgres says what is unfinished; Redis may have lost the jobs (restart, flush, a worker killed
 * mid-job). The sweeper re-enqueues work that has waited longer than `graceSeconds`.
 */
export interface SweepResult {
  finalize: number;
  /** 1 when a status drain was nudged (one drain applies every pending status event). */
  status: number;
  send: number;
  /** Provider ids taken from the stash (sends Postgres could not record in an outage). */
  adopted: number;
  /** Webhook endpoints nudged: events past their cursor, retries due (src/push/). */
  webhook: number;
  /** Messages nobody claimed past their valid_for, failed `expired` (src/outbound/expire.ts). */
  expired: number;
}

interface SweepDeps {
  db: Db;
  queues: Queues;
  clock: Clock;
  redis: RedisClient;
  logger: Logger;
  config: { redisPrefix: string; workers: { sendRetryBaseMs: number } };
}

/**
 * Sends the provider accepted but Postgres did not record (src/outbound/stash.ts):
 * recorded now, before the unsent ones below are nudged, so none of them is sent again.
 */
async function adoptStashedProviderIds(deps: SweepDeps): Promise<number> {
  let adopted = 0;
  for await (const [messageId, providerMessageId] of providerIdStash(deps).entries()) {
    if (await adoptProviderId(deps, messageId, providerMessageId)) adopted++;
  }
  return adopted;
}

const BATCH = 1000;

/**
 * Adds a job unless one with that id is already waiting or running; retries it if it had failed. A
 * completed job kept for the dashboard's history would swallow the add (BullMQ ignores an add whose
 * id exists), so it is removed first.
 */
async function nudge<T>(
  queue: Queue<T>,
  jobs: { jobId: string; data: T }[],
  options: JobsOptions = {},
): Promise<number> {
  let added = 0;
  for (const { jobId, data } of jobs) {
    const existing = await queue.getJob(jobId);
    if (existing) {
      const state = await existing.getState();
      if (state === "failed") {
        await existing.retry();
        added++;
      }
      if (state !== "completed") continue;
      await existing.remove();
    }
    // biome-ignore lint/suspicious/noExplicitAny: BullMQ's generic name/data typing is not inferable here
    await (queue as Queue<any>).add("sweep", data, { ...options, jobId });
    added++;
  }
  return added;
}

/** Messages per sweep job: a batch for the send worker, as the api's are. */
const SEND_SWEEP_CHUNK = 100;

/**
 * The unsent, in batch jobs. A chunk's deduplication id names its messages, so the same chunk swept
 * again while its job still waits adds nothing, and once that job has finished (kept, completed, for
 * the dashboard) it is added again; a duplicate that does run finds them sent and skips them.
 */
async function nudgeSweptSends(deps: SweepDeps, ids: string[]): Promise<number> {
  await nudgeSends(deps.queues.send, ids, deps.config.workers.sendRetryBaseMs, {
    name: "sweep",
    chunk: SEND_SWEEP_CHUNK,
    deduplicationId: (chunk) => `sweep-${chunk[0]}-${chunk.at(-1)}-${chunk.length}`,
  });
  return ids.length;
}

export async function sweep(deps: SweepDeps, graceSeconds = 10): Promise<SweepResult> {
  const adopted = await adoptStashedProviderIds(deps);
  // Before the unsent are nudged: an expired one is failed, not sent (and its pair's next goes on).
  const expired = await failExpiredMessages(deps);
  const cutoff = new Date(deps.clock.now().getTime() - graceSeconds * 1000);

  const unfinalized = await deps.db
    .selectFrom("inbound_events")
    .select("provider_message_id")
    .where("finalized_at", "is", null)
    .where("received_at", "<", cutoff)
    .orderBy("received_at")
    .limit(BATCH)
    .execute();

  // Status events whose message exists now but which were never applied: one drain nudge applies
  // them all, so one such event is enough to know.
  const unapplied = await deps.db
    .selectFrom("status_events")
    .select("status_events.provider_message_id")
    .where("status_events.received_at", "<", cutoff)
    .where(({ exists, selectFrom }) =>
      exists(
        selectFrom("messages")
          .select(sql`1`.as("one"))
          .whereRef("messages.provider_message_id", "=", "status_events.provider_message_id"),
      ),
    )
    .limit(1)
    .executeTakeFirst();

  // Unsent messages a send job could take now: due, and first of their (sender, contact) pair
  // (the others follow their predecessor, src/outbound/send.ts).
  const unsent = await deps.db
    .selectFrom("messages as m")
    .select("m.id")
    .where(isUnsent("m"))
    .where("m.status", "=", "accepted")
    .where("m.created_at", "<", cutoff)
    .where((eb) =>
      eb.or([eb("m.send_not_before", "is", null), eb("m.send_not_before", "<=", deps.clock.now())]),
    )
    .where(({ not, exists, selectFrom }) =>
      not(
        exists(
          selectFrom("messages as e")
            .select(sql`1`.as("one"))
            .whereRef("e.sender_id", "=", "m.sender_id")
            .whereRef("e.contact_id", "=", "m.contact_id")
            .where(isUnsent("e"))
            .whereRef("e.seq", "<", "m.seq"),
        ),
      ),
    )
    .orderBy("m.created_at")
    .limit(BATCH)
    .execute();

  const dueEndpoints = await endpointsDue(deps.db, deps.clock.now());
  const [finalize, status, send, webhook] = await Promise.all([
    nudge(
      deps.queues.finalize,
      unfinalized.map((r) => ({
        jobId: jobIdFor("in", r.provider_message_id),
        data: { providerMessageId: r.provider_message_id },
      })),
    ),
    unapplied ? nudgeDrain(deps.queues.status, { nudgedAt: Date.now() }).then(() => 1) : 0,
    nudgeSweptSends(
      deps,
      unsent.flatMap((r) => (r.id ? [r.id] : [])),
    ),
    Promise.all(dueEndpoints.map((id) => nudgeEndpoint(deps.queues, id))).then(() => dueEndpoints.length),
  ]);
  return { finalize, status, send, adopted, webhook, expired };
}
