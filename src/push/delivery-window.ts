import type { EventRow } from "../events/repository.ts";
import { MinHeap } from "../lib/min-heap.ts";

type ItemState = "queued" | "inflight" | "acked" | "blocked";

/** One event a delivery run holds. */
export interface Item {
  seq: number;
  row: EventRow;
  state: ItemState;
  attempts: number;
  firstFailedAt: Date | null;
  nextAttemptAt: Date | null;
  /** Its state changed since the last write. */
  dirty: boolean;
}

/**
 * The unacknowledged events a run holds, and their order per contact (DESIGN §12): only a contact's
 * first held event may be posted, the next only once it was acknowledged; the events that may be
 * posted now are taken oldest first, whatever their contact.
 */
export class DeliveryWindow {
  /** Unacknowledged events held, in log order; the acknowledged prefix is dropped at each write. */
  private order: Item[] = [];
  /** Per contact, its held events not yet acknowledged, in order: only the first may be posted. */
  private readonly contacts = new Map<string, Item[]>();
  /** Events that may be posted now, the oldest first. */
  private readonly ready = new MinHeap<Item>((item) => item.seq);
  /**
   * Events waiting for a retry, the soonest first, so that a run posts one when it comes due rather
   * than leaving it to the endpoint's next run. An entry whose item was released or failed again
   * since is stale (its time is no longer the item's) and skipped.
   */
  private readonly waiting = new MinHeap<{ item: Item; at: number }>((entry) => entry.at);

  /** Events held. */
  get size(): number {
    return this.order.length;
  }

  /** Events that may be posted now. */
  get readyCount(): number {
    return this.ready.size;
  }

  /** Holds an event just read, after those held; the first of its contact is offered at once. */
  hold(item: Item, now: Date): void {
    this.order.push(item);
    const queue = this.contacts.get(item.row.contact_id);
    if (queue) queue.push(item);
    else this.contacts.set(item.row.contact_id, [item]);
    if (this.contacts.get(item.row.contact_id)?.[0] === item) this.offer(item, now);
  }

  /** The oldest event that may be posted now, marked in flight. */
  take(): Item | undefined {
    while (this.ready.size > 0) {
      const item = this.ready.pop();
      if (item?.state !== "queued") continue;
      item.state = "inflight";
      return item;
    }
    return undefined;
  }

  /** An event acknowledged `at`: the next of its contact is offered. */
  acknowledge(item: Item, at: Date): void {
    item.state = "acked";
    item.dirty = true;
    const queue = this.contacts.get(item.row.contact_id);
    queue?.shift();
    const next = queue?.[0];
    if (next) this.offer(next, at);
    else this.contacts.delete(item.row.contact_id);
  }

  /** An attempt of `item` failed: it waits for its `nextAttemptAt` (retry.ts), its contact's next events behind it. */
  retryLater(item: Item): void {
    item.state = "blocked";
    this.wait(item);
  }

  /** The events whose retry came due by `now` may be posted. */
  releaseDue(now: Date): void {
    while (this.waiting.size > 0) {
      const entry = this.waiting.pop() as { item: Item; at: number };
      const { item } = entry;
      if (item.state !== "blocked" || item.nextAttemptAt?.getTime() !== entry.at) continue;
      if (entry.at > now.getTime()) {
        this.waiting.push(entry);
        return;
      }
      item.state = "queued";
      this.ready.push(item);
    }
  }

  /**
   * The endpoint answered again after it looked down: every event waiting for a retry, but those in
   * `except`, may be posted now. Each keeps its attempts (a next failure backs off further) and its
   * first failure (the 3 days).
   */
  releaseWaiting(except: ReadonlySet<Item>): void {
    for (const item of this.order) {
      if (item.state !== "blocked" || except.has(item)) continue;
      item.state = "queued";
      item.nextAttemptAt = null;
      item.dirty = true;
      this.ready.push(item);
    }
  }

  /** The first event held and not acknowledged. */
  firstPending(): Item | undefined {
    return this.order.find((item) => item.state !== "acked");
  }

  /** Events whose state changed since the last write. */
  changed(): Item[] {
    return this.order.filter((item) => item.dirty);
  }

  /** When the first event waiting for a retry is due (null when none waits). */
  soonestRetry(): Date | null {
    const blocked = this.order.filter((item) => item.state === "blocked" && item.nextAttemptAt);
    return blocked.reduce<Date | null>(
      (soonest, item) =>
        !soonest || (item.nextAttemptAt as Date) < soonest ? (item.nextAttemptAt as Date) : soonest,
      null,
    );
  }

  /** Lets go of the events up to `cursor` (all acknowledged: done with). */
  dropThrough(cursor: number): void {
    let drop = 0;
    while (drop < this.order.length && (this.order[drop] as Item).seq <= cursor) drop++;
    if (drop > 0) this.order = this.order.slice(drop);
  }

  /** A contact's first held event becomes ready, unless it waits for a retry. */
  private offer(item: Item, now: Date): void {
    if (item.state !== "queued") return;
    if (item.nextAttemptAt && item.nextAttemptAt > now) {
      item.state = "blocked";
      this.wait(item);
      return;
    }
    this.ready.push(item);
  }

  private wait(item: Item): void {
    if (item.nextAttemptAt) this.waiting.push({ item, at: item.nextAttemptAt.getTime() });
  }
}
