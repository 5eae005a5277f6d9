import { randomUUID } from "node:crypto";
import { sql } from "kysely";
import type { Clock } from "../clock.ts";
import type { WebhookTuning } from "../config.ts";
import type { Db } from "../db/connect.ts";
import { presentEvent } from "../events/presenter.ts";
import { type EventRow, eventEntriesAfter, eventHead } from "../events/repository.ts";
import { MinHeap } from "../lib/min-heap.ts";
import type { Logger } from "../logger.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import { attemptOf, type DeliveryAttempt, recordAttempts } from "./attempt-log.ts";
import { deliverEvent } from "./post.ts";
import type { EndpointRow } from "./repository.ts";
import { signingSecrets } from "./service.ts";
import { type AddressLookup, endpointAddressProblem } from "./url-safety.ts";

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
 * RUN_LIMIT_MS (the job is nudged again to go on), or when its endpoint changed.
 */

export interface DeliveryDeps {
  db: Db;
  redis: RedisClient;
  keys: Pick<RedisKeys, "webhookAttempts">;
  clock: Clock;
  logger: Logger;
  config: { providerTokenKey: Buffer; webhooks: WebhookTuning };
  lookup?: AddressLookup;
  /** Each attempt's outcome, and an acknowledged event's lag since it happened (metrics). */
  observe?: (outcome: DeliveryOutcome, latencySeconds: number, lagSeconds?: number) => void;
}

export type DeliveryOutcome = "acknowledged" | "failed" | "timeout" | "gone" | "refused";

export interface DeliveryRun {
  /** Why the run ended. */
  ended: "idle" | "limit" | "paused" | "disabled" | "changed" | "missing";
  attempts: number;
  acknowledged: number;
  /** More is ready than the run got to: nudge the endpoint again. */
  more: boolean;
  /** When the first event waiting for a retry is due (null when none waits). */
  retryAt: Date | null;
}

/** How long one run goes on before it hands its slot back (the job is nudged again). */
export const RUN_LIMIT_MS = 10_000;
/** Unacknowledged events read at a time, and held at most. */
const READ_BATCH = 1000;
const WINDOW_MAX = 5000;
/**
 * How often a run writes its progress (a crash re-posts at most this much: at least once), and how
 * often a busy run looks for new events (the sequencer numbers them every 100 ms). Each write is a
 * transaction and each look two queries: in the drain benchmark the worker's CPU went mostly to
 * Postgres round trips.
 */
const FLUSH_EVERY_MS = 500;
const POLL_EVERY_MS = 100;
/** Requests in flight before the first success of a run: a receiver that is down gets a few, not hundreds. */
const PROBE_IN_FLIGHT = 4;
/** Failures in a row, with no success in the run, after which the run stops trying. */
const CIRCUIT_FAILURES = 10;
/** The longest retry delay (DESIGN §12), and how long an event may fail before the endpoint is disabled. */
const RETRY_CAP_MS = 3600_000;
export const GIVE_UP_AFTER_MS = 3 * 86_400_000;

/** The delay before attempt `attempts + 1`: base doubling, capped at an hour, ±20 % jitter. */
export function retryDelayMs(baseMs: number, attempts: number, random = Math.random): number {
  const nominal = Math.min(RETRY_CAP_MS, baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.min(RETRY_CAP_MS, Math.round(nominal * (0.8 + 0.4 * random())));
}

type ItemState = "queued" | "inflight" | "acked" | "blocked";

interface Item {
  seq: number;
  row: EventRow;
  state: ItemState;
  attempts: number;
  firstFailedAt: Date | null;
  nextAttemptAt: Date | null;
  /** Its state changed since the last write. */
  dirty: boolean;
}

class EndpointChanged extends Error {}

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

class Run {
  private readonly tenantId: string;
  private readonly generation: number;
  private readonly lease: string;
  private url: string;
  private secrets: string[];
  /** Unacknowledged events held, in log order; the acknowledged prefix is dropped at each write. */
  private order: Item[] = [];
  /** Per contact, its held events not yet acknowledged, in order: only the first may be posted. */
  private readonly contacts = new Map<string, Item[]>();
  /** Events that may be posted now, the oldest first. */
  private readonly ready = new MinHeap<Item>((item) => item.seq);
  private inFlight = 0;
  private cursor: number;
  /** The last position read: every unacknowledged subscribed event up to it is held. */
  private readUpTo: number;
  /** The last read reached the end of the log (as of `headAtRead`). */
  private atEnd = false;
  private headAtRead = 0;
  private lastReadAt = 0;
  private failuresInARow = 0;
  private stopping: DeliveryRun["ended"] | undefined;
  private disable: "failing" | "gone" | undefined;
  private lastSuccessAt: Date | undefined;
  private lastFailure: { at: Date; status: number | null; error: string } | undefined;
  private attempts: DeliveryAttempt[] = [];
  private addressProblem: string | undefined;
  private wake: () => void = () => {};
  private readonly report = { attempts: 0, acknowledged: 0 };
  private retryAt: Date | null = null;

  constructor(
    private readonly deps: DeliveryDeps,
    private readonly endpoint: EndpointRow,
  ) {
    this.tenantId = endpoint.tenant_id;
    this.generation = endpoint.generation;
    this.lease = endpoint.lease ?? "";
    this.url = endpoint.url;
    this.cursor = endpoint.cursor_seq;
    this.readUpTo = endpoint.cursor_seq;
    this.secrets = signingSecrets(deps.config.providerTokenKey, endpoint, deps.clock.now());
  }

  async execute(): Promise<DeliveryRun> {
    const started = Date.now();
    this.addressProblem = await endpointAddressProblem(
      this.url,
      this.deps.config.webhooks.allowPrivateUrls,
      this.deps.lookup,
    );
    let lastWrite = Date.now();
    try {
      await this.read();
      for (;;) {
        if (Date.now() - started > RUN_LIMIT_MS) this.stopping ??= "limit";
        if (!this.stopping) this.launch();
        if (this.inFlight === 0) {
          if (this.stopping || this.circuitOpen()) break;
          if (this.ready.size === 0) {
            // Nothing ready and nothing in flight: one more look for new events (each look reads
            // further, so this ends), then the run is done.
            if (!(await this.read(true))) break;
            continue;
          }
        }
        const woken = new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        await Promise.race([woken, Bun.sleep(POLL_EVERY_MS)]);
        if (Date.now() - lastWrite >= FLUSH_EVERY_MS) {
          await this.write(false);
          lastWrite = Date.now();
        }
        if (!this.stopping && this.ready.size < this.deps.config.webhooks.maxInFlight) await this.read();
      }
      await this.write(true);
    } catch (error) {
      if (!(error instanceof EndpointChanged)) throw error;
      this.stopping = "changed";
      // Let what is in flight finish (its outcome is not written: the next run posts it again).
      while (this.inFlight > 0) await Bun.sleep(POLL_EVERY_MS);
    }
    const ended = this.stopping ?? "idle";
    return {
      ended,
      ...this.report,
      more: ended === "limit" && (this.ready.size > 0 || !this.atEnd),
      retryAt: ended === "changed" || ended === "disabled" ? null : this.retryAt,
    };
  }

  private circuitOpen(): boolean {
    return this.report.acknowledged === 0 && this.failuresInARow >= CIRCUIT_FAILURES;
  }

  /**
   * Reads the next unacknowledged events after `readUpTo` into the window. With `force` it reads
   * even when it read a moment ago. Returns whether anything new came.
   */
  private async read(force = false): Promise<boolean> {
    const now = Date.now();
    if (this.order.length >= WINDOW_MAX) return false;
    if (!force && this.atEnd && now - this.lastReadAt < POLL_EVERY_MS) return false;
    this.lastReadAt = now;
    const limit = Math.min(READ_BATCH, WINDOW_MAX - this.order.length);
    // The head first: every event up to it is committed, so when the read reaches past the last row
    // it returns, the cursor may move up to the head (events of types not subscribed in between).
    const head = await eventHead(this.deps.db, this.tenantId);
    const rows = await eventEntriesAfter(this.deps.db, this.tenantId, this.readUpTo, this.endpoint.events)
      .leftJoin("webhook_deliveries as d", (join) =>
        join.on("d.endpoint_id", "=", this.endpoint.id).onRef("d.seq", "=", "events.seq"),
      )
      .select(["d.attempts", "d.first_failed_at", "d.next_attempt_at"])
      .where((eb) => eb.or([eb("d.acknowledged", "is", null), eb("d.acknowledged", "=", false)]))
      .limit(limit)
      .execute();
    this.atEnd = rows.length < limit;
    this.headAtRead = head;
    const readAt = this.deps.clock.now();
    for (const row of rows) {
      const item: Item = {
        seq: row.event_seq,
        row,
        state: "queued",
        attempts: row.attempts ?? 0,
        firstFailedAt: row.first_failed_at ?? null,
        nextAttemptAt: row.next_attempt_at ?? null,
        dirty: false,
      };
      this.order.push(item);
      const queue = this.contacts.get(row.contact_id);
      if (queue) queue.push(item);
      else this.contacts.set(row.contact_id, [item]);
      if (this.contacts.get(row.contact_id)?.[0] === item) this.offer(item, readAt);
    }
    const last = rows.at(-1);
    if (last) this.readUpTo = last.event_seq;
    if (this.atEnd) this.readUpTo = Math.max(this.readUpTo, head);
    return rows.length > 0;
  }

  /** A contact's first held event becomes ready, unless it waits for a retry. */
  private offer(item: Item, now: Date): void {
    if (item.state !== "queued") return;
    if (item.nextAttemptAt && item.nextAttemptAt > now) {
      item.state = "blocked";
      return;
    }
    this.ready.push(item);
  }

  private launch(): void {
    const { maxInFlight } = this.deps.config.webhooks;
    const cap = this.report.acknowledged > 0 ? maxInFlight : Math.min(PROBE_IN_FLIGHT, maxInFlight);
    while (this.inFlight < cap && this.ready.size > 0 && !this.circuitOpen()) {
      const item = this.ready.pop();
      if (item?.state !== "queued") continue;
      item.state = "inflight";
      this.inFlight++;
      void this.attempt(item).finally(() => {
        this.inFlight--;
        this.wake();
      });
    }
  }

  private async attempt(item: Item): Promise<void> {
    const body = JSON.stringify(presentEvent(item.row));
    const outcome = await deliverEvent(
      {
        url: this.url,
        addressProblem: this.addressProblem,
        secrets: this.secrets,
        timeoutMs: this.deps.config.webhooks.timeoutMs,
      },
      item.row.event_id,
      body,
      this.deps.clock.now(),
    );
    this.report.attempts++;
    const at = this.deps.clock.now();
    this.attempts.push(attemptOf(item.row.event_id, item.row.event_type, outcome, at));
    if (this.stopping === "changed") return;
    if (outcome.acknowledged) {
      this.report.acknowledged++;
      this.failuresInARow = 0;
      this.lastSuccessAt = at;
      item.state = "acked";
      item.dirty = true;
      this.deps.observe?.(
        "acknowledged",
        outcome.latencyMs / 1000,
        (at.getTime() - item.row.event_created_at.getTime()) / 1000,
      );
      const queue = this.contacts.get(item.row.contact_id);
      queue?.shift();
      const next = queue?.[0];
      if (next) this.offer(next, at);
      else this.contacts.delete(item.row.contact_id);
      return;
    }
    this.failuresInARow++;
    item.state = "blocked";
    item.dirty = true;
    item.attempts++;
    item.firstFailedAt ??= at;
    item.nextAttemptAt = new Date(
      at.getTime() + retryDelayMs(this.deps.config.webhooks.retryBaseMs, item.attempts),
    );
    this.lastFailure = { at, status: outcome.statusCode, error: outcome.error ?? "failed" };
    const gone = outcome.statusCode === 410;
    this.deps.observe?.(
      gone ? "gone" : this.addressProblem ? "refused" : outcome.timedOut ? "timeout" : "failed",
      outcome.latencyMs / 1000,
    );
    if (gone) this.disable = "gone";
    else if (at.getTime() - item.firstFailedAt.getTime() >= GIVE_UP_AFTER_MS) this.disable ??= "failing";
    if (this.disable) this.stopping = "disabled";
  }

  /** The new cursor: just before the first event held and not acknowledged, or the end of what was read. */
  private settledCursor(): number {
    const first = this.order.find((item) => item.state !== "acked");
    if (first) return first.seq - 1;
    return Math.max(this.cursor, this.atEnd ? Math.max(this.readUpTo, this.headAtRead) : this.readUpTo);
  }

  /**
   * Writes the run's progress in one transaction: the cursor, what was acknowledged past it, what
   * waits for a retry, the last success and failure; at the end also when to try again.
   */
  private async write(final: boolean): Promise<void> {
    const cursor = this.settledCursor();
    const changed = this.order.filter((item) => item.dirty);
    const rows = changed.filter((item) => item.seq > cursor);
    const blocked = this.order.filter((item) => item.state === "blocked" && item.nextAttemptAt);
    const retryAt = blocked.reduce<Date | null>(
      (soonest, item) =>
        !soonest || (item.nextAttemptAt as Date) < soonest ? (item.nextAttemptAt as Date) : soonest,
      null,
    );
    // Every attempt of this run failed: the receiver looks down; nothing is tried until the first retry.
    const pausedUntil = final && this.report.attempts > 0 && this.report.acknowledged === 0 ? retryAt : null;
    const attempts = this.attempts;
    this.attempts = [];
    this.retryAt = retryAt;
    const updated = await this.deps.db.transaction().execute(async (trx) => {
      const row = await trx
        .updateTable("webhook_endpoints")
        .set({
          cursor_seq: cursor,
          retry_at: retryAt,
          paused_until: pausedUntil,
          ...(this.lastSuccessAt && { last_success_at: this.lastSuccessAt }),
          ...(this.lastFailure && {
            last_failure_at: this.lastFailure.at,
            last_failure_status: this.lastFailure.status,
            last_failure_error: this.lastFailure.error,
          }),
          ...(this.disable && { status: "disabled" as const, disabled_reason: this.disable }),
        })
        .where("id", "=", this.endpoint.id)
        .where("generation", "=", this.generation)
        .where("lease", "=", this.lease)
        .where("status", "=", "enabled")
        .returningAll()
        .executeTakeFirst();
      if (!row) return undefined;
      if (rows.length > 0) {
        await sql`
          INSERT INTO webhook_deliveries AS d
            (endpoint_id, seq, acknowledged, attempts, first_failed_at, next_attempt_at)
          SELECT ${this.endpoint.id}, * FROM unnest(
            ${rows.map((item) => item.seq)}::bigint[],
            ${rows.map((item) => item.state === "acked")}::boolean[],
            ${rows.map((item) => item.attempts)}::int[],
            ${rows.map((item) => item.firstFailedAt?.toISOString() ?? null)}::timestamptz[],
            ${rows.map((item) => item.nextAttemptAt?.toISOString() ?? null)}::timestamptz[])
          ON CONFLICT (endpoint_id, seq) DO UPDATE SET
            acknowledged = excluded.acknowledged, attempts = excluded.attempts,
            first_failed_at = excluded.first_failed_at, next_attempt_at = excluded.next_attempt_at`.execute(
          trx,
        );
      }
      if (cursor > this.cursor) {
        await trx
          .deleteFrom("webhook_deliveries")
          .where("endpoint_id", "=", this.endpoint.id)
          .where("seq", "<=", cursor)
          .execute();
      }
      return row;
    });
    await recordAttempts(this.deps.redis, this.deps.keys, this.endpoint.id, attempts).catch((error) =>
      this.deps.logger.warn(
        { endpoint: this.endpoint.id, err: (error as Error).message },
        "attempt log not written",
      ),
    );
    if (!updated) throw new EndpointChanged();
    for (const item of changed) item.dirty = false;
    this.cursor = cursor;
    this.lastSuccessAt = undefined;
    this.lastFailure = undefined;
    // Acknowledged events up to the cursor are done with.
    let drop = 0;
    while (drop < this.order.length && (this.order[drop] as Item).seq <= cursor) drop++;
    if (drop > 0) this.order = this.order.slice(drop);
    // A new url or secret applies from the next post.
    this.url = updated.url;
    this.secrets = signingSecrets(this.deps.config.providerTokenKey, updated, this.deps.clock.now());
  }
}
