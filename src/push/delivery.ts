import { randomUUID } from "node:crypto";
import { type DeliveryDeps, type DeliveryRun, Run } from "./endpoint-run.ts";

/**
 * One delivery run of one endpoint (DESIGN §12), a webhook job: read the endpoint's unacknowledged
 * events from its cursor, post each contact's events one after another (the next only once the
 * previous was acknowledged), many contacts at once, and write back how far it came.
 *
 * Position: `cursor_seq` = everything at or before it acknowledged (or of a type not subscribed).
 * Past it, acknowledgements out of order (another contact was faster) and events waiting for a retry
 * are rows of webhook_deliveries. Every write is guarded by the endpoint's generation and the run's
 * lease: a replay, new event types, a disable, a delete or a newer run make the run stop without
 * writing.
 *
 * A run ends when nothing is ready (everything acknowledged, or waiting for a retry), after
 * RUN_LIMIT_MS (the job is nudged again to go on), or when its endpoint changed. A run in which
 * every attempt failed pauses the endpoint until its earliest retry; the first success of the run
 * after it ends every contact's wait at once (the endpoint is back).
 *
 * Here the run's start (its lease taken); the run itself is endpoint-run.ts, the order per contact
 * delivery-window.ts, the backoff retry.ts, and what it reads and writes delivery-store.ts.
 */

export {
  type DeliveryDeps,
  type DeliveryOutcome,
  type DeliveryRun,
  RUN_LIMIT_MS,
} from "./endpoint-run.ts";
export { GIVE_UP_AFTER_MS, retryDelayMs } from "./retry.ts";

export async function deliverEndpoint(deps: DeliveryDeps, endpointId: string): Promise<DeliveryRun> {
  const now = deps.clock.now();
  // The run takes the endpoint's lease: an older run still going (its job's lock lapsed and the
  // job was handed on) stops at its next write, so one run at a time posts each contact's events.
  // Only a run that goes ahead takes it: a nudge of a paused or disabled endpoint writes nothing.
  const endpoint = await deps.db
    .updateTable("webhook_endpoints")
    .set({ lease: randomUUID() })
    .where("id", "=", endpointId)
    .where("status", "=", "enabled")
    .where((eb) => eb.or([eb("paused_until", "is", null), eb("paused_until", "<=", now)]))
    .returningAll()
    .executeTakeFirst();
  if (endpoint) return new Run(deps, endpoint).execute();
  const idle = { attempts: 0, acknowledged: 0, more: false, retryAt: null };
  const state = await deps.db
    .selectFrom("webhook_endpoints")
    .select(["status", "paused_until"])
    .where("id", "=", endpointId)
    .executeTakeFirst();
  if (!state) return { ended: "missing", ...idle };
  if (state.status !== "enabled") return { ended: "disabled", ...idle };
  return { ended: "paused", ...idle, retryAt: state.paused_until };
}
