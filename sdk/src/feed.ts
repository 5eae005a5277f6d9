import { sleep, type Transport } from "./transport.ts";
import type { FeedMessage, WebhookEvent } from "./types.ts";

export interface FeedOptions {
  /** A cursor persisted from an earlier run (`onCursor`); absent = from the start of the feed. */
  since?: string;
  /** Messages per page (1..500, the API's default 100). */
  limit?: number;
  /** Stops the consumer: the loop ends cleanly (no error) at the next page or wait. */
  signal?: AbortSignal;
  /**
   * Called with each page's `next_cursor` once the consumer has taken every message before it (the
   * for-await body has returned for the page's last message). Persist it; pass it as `since` to
   * resume. Awaited: the next page is fetched after it resolves.
   */
  onCursor?: (cursor: string) => void | Promise<void>;
  /** How many recent message ids are remembered to drop redeliveries. Default 10 000. */
  dedupeWindow?: number;
  /** First wait after an empty page, doubled on each further empty page. Default 250 ms. */
  minWaitMs?: number;
  /** Longest wait between polls of an empty feed. Default 5 000 ms. */
  maxWaitMs?: number;
  /**
   * Ends the iteration (normally, no error) at the head: after the first page that says nothing more
   * is beyond its cursor (`has_more` false), once that page was taken and its cursor reported. A
   * catch-up that reads everything there is, however long the requests and their retries take; a
   * failure is thrown as it is without this option. Default false: follow the log for as long as
   * the caller iterates.
   */
  stopAtHead?: boolean;
}

/** A set that remembers only the most recently added `capacity` values. */
class RecentIds {
  private readonly ids = new Set<string>();
  constructor(private readonly capacity: number) {}
  /** Adds `id`; false when it was already there. */
  add(id: string): boolean {
    if (this.ids.has(id)) return false;
    this.ids.add(id);
    if (this.ids.size > this.capacity) {
      const oldest = this.ids.values().next().value;
      if (oldest !== undefined) this.ids.delete(oldest);
    }
    return true;
  }
}

/**
 * Follows GET /messages for as long as the caller iterates: at-least-once delivery made easy. The
 * feed may repeat a message (SPEC §4), so ids seen recently are dropped; the cursor is handed to
 * `onCursor` only after every message before it was taken, so a consumer that dies and resumes from
 * its persisted cursor sees every message at least once.
 */
export function consumeFeed(transport: Transport, options: FeedOptions = {}): AsyncGenerator<FeedMessage> {
  return consumeLog<FeedMessage>(transport, "/messages", options);
}

/** GET /events (DESIGN §12), followed the same way; `types` narrows it. */
export function consumeEvents(
  transport: Transport,
  options: FeedOptions & { types?: WebhookEvent["type"][] } = {},
): AsyncGenerator<WebhookEvent> {
  return consumeLog<WebhookEvent>(transport, "/events", options, { types: options.types?.join(",") });
}

/** A list read from a cursor (the feed, the event log): pages, de-duplication, the cursor, waits. */
async function* consumeLog<T extends { id: string | null }>(
  transport: Transport,
  path: string,
  options: FeedOptions,
  extraQuery: Record<string, string | undefined> = {},
): AsyncGenerator<T> {
  const { signal, onCursor } = options;
  const minWait = options.minWaitMs ?? 250;
  const maxWait = options.maxWaitMs ?? 5_000;
  const seen = new RecentIds(options.dedupeWindow ?? 10_000);
  let cursor = options.since;
  let wait = minWait;
  while (!signal?.aborted) {
    let page: { data: T[]; has_more: boolean; next_cursor: string };
    try {
      page = await transport.request<{ data: T[]; has_more: boolean; next_cursor: string }>("GET", path, {
        query: { since: cursor, limit: options.limit, ...extraQuery },
        signal,
      });
    } catch (error) {
      if (signal?.aborted) return;
      throw error;
    }
    const last = page.data.length - 1;
    for (const [index, item] of page.data.entries()) {
      if (item.id !== null && !seen.add(item.id)) continue;
      yield item;
      // Stopped partway through a page: its cursor is not reported (the rest was not taken).
      if (signal?.aborted && index < last) return;
    }
    if (page.next_cursor !== cursor) {
      cursor = page.next_cursor;
      await onCursor?.(cursor);
    }
    if (options.stopAtHead && !page.has_more) return;
    // An empty page with has_more (a `types` filter looked at part of the log and found none of
    // them): more is there already, so ask again at once.
    if (page.data.length > 0 || page.has_more) {
      wait = minWait;
      continue;
    }
    try {
      await sleep(wait, signal);
    } catch {
      return;
    }
    wait = Math.min(wait * 2, maxWait);
  }
}
