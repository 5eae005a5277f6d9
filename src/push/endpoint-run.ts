import type { Clock } from "../clock.ts";
import type { WebhookTuning } from "../config.ts";
import type { Db } from "../db/connect.ts";
import { presentEvent } from "../events/presenter.ts";
import type { Logger } from "../logger.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import { attemptOf, type DeliveryAttempt, recordAttempts } from "./attempt-log.ts";
import { unacknowledgedEvents, writeProgress } from "./delivery-store.ts";
import { DeliveryWindow, type Item } from "./delivery-window.ts";
import { deliverEvent } from "./post.ts";
import type { EndpointRow } from "./repository.ts";
import { scheduleRetry } from "./retry.ts";
import { signingSecrets } from "./service.ts";
import { type AddressLookup, checkEndpointUrl, type UrlCheck } from "./url-safety.ts";

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

class EndpointChanged extends Error {}

/**
 * The run of one endpoint whose lease was taken (delivery.ts): reads its unacknowledged events into
 * the window, posts them (many contacts at once, each contact's in order), and writes its progress
 * every FLUSH_EVERY_MS and at the end, until nothing is ready, RUN_LIMIT_MS passed or the endpoint
 * changed.
 */
export class Run {
  private readonly generation: number;
  private readonly lease: string;
  private url: string;
  private secrets: string[];
  private readonly window = new DeliveryWindow();
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
  /** Where the url leads, checked and pinned at the start of the run and when the url changes. */
  private destination: UrlCheck = { problem: "not checked yet" };
  private wake: () => void = () => {};
  private readonly report = { attempts: 0, acknowledged: 0 };
  private retryAt: Date | null = null;
  /**
   * The endpoint looked down when the run began (the previous run failed every attempt, so it was
   * paused): the run's first success says it is back (`recover`).
   */
  private recovering: boolean;
  private recovered = false;
  /** Events whose attempt failed in this run (not released by its recovery). */
  private readonly failedHere = new Set<Item>();
  /** After a recovery: the events past this position still wait for a retry in Postgres; the next write releases them. */
  private releaseAfter: number | undefined;

  constructor(
    private readonly deps: DeliveryDeps,
    private readonly endpoint: EndpointRow,
  ) {
    this.generation = endpoint.generation;
    this.lease = endpoint.lease ?? "";
    this.url = endpoint.url;
    this.cursor = endpoint.cursor_seq;
    this.readUpTo = endpoint.cursor_seq;
    this.secrets = signingSecrets(deps.config.providerTokenKey, endpoint, deps.clock.now());
    this.recovering = endpoint.paused_until !== null;
  }

  async execute(): Promise<DeliveryRun> {
    const started = Date.now();
    this.destination = await this.checkUrl(this.url);
    let lastWrite = Date.now();
    try {
      await this.read();
      for (;;) {
        if (Date.now() - started > RUN_LIMIT_MS) this.stopping ??= "limit";
        // A retry that came due while the run goes on is posted now, not left to the next run.
        this.window.releaseDue(this.deps.clock.now());
        if (!this.stopping) this.launch();
        if (this.inFlight === 0) {
          if (this.stopping || this.circuitOpen()) break;
          if (this.window.readyCount === 0) {
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
        if (!this.stopping && this.window.readyCount < this.deps.config.webhooks.maxInFlight)
          await this.read();
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
      more: ended === "limit" && (this.window.readyCount > 0 || !this.atEnd),
      retryAt: ended === "changed" || ended === "disabled" ? null : this.retryAt,
    };
  }

  private checkUrl(url: string): Promise<UrlCheck> {
    return checkEndpointUrl(url, this.deps.config.webhooks.allowPrivateUrls, this.deps.lookup);
  }

  private circuitOpen(): boolean {
    return this.report.acknowledged === 0 && this.failuresInARow >= CIRCUIT_FAILURES;
  }

  /**
   * Reads the next unacknowledged events after `readUpTo` into the window, from a bounded range of
   * positions (unacknowledgedEvents). With `force` it reads even when it read a moment ago. Returns
   * whether anything came or the read moved on short of the end: a range with none of the
   * endpoint's types still moves `readUpTo` (and so the cursor) past it, and the next read takes the
   * next range.
   */
  private async read(force = false): Promise<boolean> {
    const now = Date.now();
    if (this.window.size >= WINDOW_MAX) return false;
    if (!force && this.atEnd && now - this.lastReadAt < POLL_EVERY_MS) return false;
    this.lastReadAt = now;
    const limit = Math.min(READ_BATCH, WINDOW_MAX - this.window.size);
    const { rows, examinedTo, head } = await unacknowledgedEvents(
      this.deps.db,
      this.endpoint,
      this.readUpTo,
      limit,
    );
    // Every event up to `examinedTo` is held or not the endpoint's; at the head, the cursor may move
    // up to it (events of types not subscribed in between).
    this.atEnd = examinedTo >= head;
    this.headAtRead = head;
    const readAt = this.deps.clock.now();
    for (const row of rows) {
      const item: Item = {
        seq: row.event_seq,
        row,
        state: "queued",
        attempts: row.attempts ?? 0,
        firstFailedAt: row.first_failed_at ?? null,
        // Once the endpoint is back, an event read now waits no longer: it failed before the recovery
        // (this run's own failures are held already), and the next write releases it in Postgres too.
        nextAttemptAt: this.recovered ? null : (row.next_attempt_at ?? null),
        dirty: false,
      };
      this.window.hold(item, readAt);
    }
    const movedOn = examinedTo > this.readUpTo;
    this.readUpTo = Math.max(this.readUpTo, examinedTo);
    return rows.length > 0 || (movedOn && !this.atEnd);
  }

  private launch(): void {
    const { maxInFlight } = this.deps.config.webhooks;
    const cap = this.report.acknowledged > 0 ? maxInFlight : Math.min(PROBE_IN_FLIGHT, maxInFlight);
    while (this.inFlight < cap && this.window.readyCount > 0 && !this.circuitOpen()) {
      const item = this.window.take();
      if (!item) break;
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
        destination: this.destination,
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
      if (this.recovering) this.recover();
      this.report.acknowledged++;
      this.failuresInARow = 0;
      this.lastSuccessAt = at;
      this.window.acknowledge(item, at);
      this.deps.observe?.(
        "acknowledged",
        outcome.latencyMs / 1000,
        (at.getTime() - item.row.event_created_at.getTime()) / 1000,
      );
      return;
    }
    this.failuresInARow++;
    const givingUp = scheduleRetry(item, at, this.deps.config.webhooks.retryBaseMs);
    this.window.retryLater(item);
    if (this.recovering) this.failedHere.add(item);
    this.lastFailure = { at, status: outcome.statusCode, error: outcome.error ?? "failed" };
    const gone = outcome.statusCode === 410;
    this.deps.observe?.(
      gone ? "gone" : this.destination.problem ? "refused" : outcome.timedOut ? "timeout" : "failed",
      outcome.latencyMs / 1000,
    );
    if (gone) this.disable = "gone";
    else if (givingUp) this.disable ??= "failing";
    if (this.disable) this.stopping = "disabled";
  }

  /**
   * The endpoint answered again after it looked down: every event that was waiting for a retry
   * when the run began, of every contact, may be posted at once (as many in flight as a healthy
   * endpoint gets) rather than each waiting out its own backoff. Once a run, and only in a run
   * that follows one without any success. An event that failed in this very run keeps its wait:
   * it failed while the endpoint answered others, so its content, not the endpoint, is the likely
   * cause. A success while another contact's event keeps failing thus releases nothing, and that
   * event keeps its backoff. Released, an event keeps its attempts and first failure: a further
   * failure backs off longer, and the 3 days run on.
   */
  private recover(): void {
    this.recovering = false;
    this.recovered = true;
    this.releaseAfter = this.readUpTo;
    this.window.releaseWaiting(this.failedHere);
    this.failedHere.clear();
  }

  /** The new cursor: just before the first event held and not acknowledged, or the end of what was read. */
  private settledCursor(): number {
    const first = this.window.firstPending();
    if (first) return first.seq - 1;
    return Math.max(this.cursor, this.atEnd ? Math.max(this.readUpTo, this.headAtRead) : this.readUpTo);
  }

  /**
   * Writes the run's progress (delivery-store.ts): the cursor, what was acknowledged past it, what
   * waits for a retry, the last success and failure; at the end also when to try again. Then the
   * attempts to the endpoint's attempt log.
   */
  private async write(final: boolean): Promise<void> {
    const cursor = this.settledCursor();
    const changed = this.window.changed();
    const retryAt = this.window.soonestRetry();
    // Every attempt of this run failed: the receiver looks down; nothing is tried until the first retry.
    const pausedUntil = final && this.report.attempts > 0 && this.report.acknowledged === 0 ? retryAt : null;
    const attempts = this.attempts;
    this.attempts = [];
    this.retryAt = retryAt;
    const releaseAfter = this.releaseAfter;
    const updated = await writeProgress(
      this.deps.db,
      { id: this.endpoint.id, generation: this.generation, lease: this.lease },
      {
        fromCursor: this.cursor,
        cursor,
        items: changed.filter((item) => item.seq > cursor),
        retryAt,
        pausedUntil,
        releaseAfter,
        health: () => ({
          lastSuccessAt: this.lastSuccessAt,
          lastFailure: this.lastFailure,
          disable: this.disable,
        }),
      },
    );
    await recordAttempts(this.deps.redis, this.deps.keys, this.endpoint.id, attempts).catch((error) =>
      this.deps.logger.warn(
        { endpoint: this.endpoint.id, err: (error as Error).message },
        "attempt log not written",
      ),
    );
    if (!updated) throw new EndpointChanged();
    if (releaseAfter !== undefined) this.releaseAfter = undefined;
    for (const item of changed) item.dirty = false;
    this.cursor = cursor;
    this.lastSuccessAt = undefined;
    this.lastFailure = undefined;
    // Acknowledged events up to the cursor are done with.
    this.window.dropThrough(cursor);
    // A new url or secret applies from the next post; a new url once checked and pinned in turn.
    if (updated.url !== this.url) this.destination = await this.checkUrl(updated.url);
    this.url = updated.url;
    this.secrets = signingSecrets(this.deps.config.providerTokenKey, updated, this.deps.clock.now());
  }
}
