import { BatchSendError } from "./errors.ts";
import { sleep, type Transport } from "./transport.ts";
import type { BatchResult, SendBatchItem } from "./types.ts";

/**
 * `messages.sendBatch`: any number of sends through POST /messages/batch, 1,000 items (and at most
 * 4 MB) a call, the calls one after another.
 *
 * One after another, not side by side, because the API's promises about a batch then hold for the
 * whole array: messages to one contact are handed to the provider in array order (a later call is
 * accepted after the earlier one's items), and when the daily quota runs out it is the last items
 * that get 429 `quota_exceeded`. Each call spends one unit of the per-second send limit, so
 * parallel calls would mostly wait on each other's 429s anyway, while one call already carries 1,000
 * messages.
 */

export interface SendBatchOptions {
  /** Stops between and during calls; sendBatch then rejects with BatchSendError (its `cause` the reason). */
  signal?: AbortSignal;
}

/** The API's limits of one call (DESIGN §13). */
export const BATCH_MAX_ITEMS = 1000;
export const BATCH_MAX_BYTES = 4 * 1024 * 1024;
/** `{"messages":[` and `]}`. */
const ENVELOPE_BYTES = 15;

/**
 * An item whose key is still taken by an earlier attempt in flight (409 `idempotency_key_in_use`,
 * which the API answers with `Retry-After: 1`) is asked again this often, after this long.
 */
const IN_USE_RETRIES = 10;
const IN_USE_WAIT_MS = 1000;

interface BatchPage {
  data: BatchResult[];
}

const utf8 = new TextEncoder();

/** Consecutive items, each run within the item and byte limits of one call. */
function chunksOf(items: readonly SendBatchItem[]): { first: number; end: number }[] {
  const chunks: { first: number; end: number }[] = [];
  let first = 0;
  let bytes = ENVELOPE_BYTES;
  items.forEach((item, i) => {
    const size = utf8.encode(JSON.stringify(item) ?? "null").length + 1; // the comma before it
    if (i > first && (i - first === BATCH_MAX_ITEMS || bytes + size > BATCH_MAX_BYTES)) {
      chunks.push({ first, end: i });
      first = i;
      bytes = ENVELOPE_BYTES;
    }
    bytes += size;
  });
  if (items.length > first) chunks.push({ first, end: items.length });
  return chunks;
}

export async function sendBatch(
  transport: Transport,
  items: readonly SendBatchItem[],
  options: SendBatchOptions = {},
): Promise<BatchResult[]> {
  // Every item gets its key before the first attempt (yours, or a random one), as a single send gets
  // its Idempotency-Key: the transport's retries of a call (a lost answer, 503, 429) send the same
  // body, so an item the lost attempt accepted is answered with its message (200), not sent again.
  const keyed: SendBatchItem[] = items.map((item) =>
    item.idempotency_key === undefined ? { ...item, idempotency_key: crypto.randomUUID() } : item,
  );
  const rows: (BatchResult | undefined)[] = new Array(keyed.length);
  for (const chunk of chunksOf(keyed)) {
    try {
      await sendChunk(transport, keyed, chunk.first, chunk.end, rows, options.signal);
    } catch (cause) {
      const results: BatchResult[] = [];
      const unanswered: number[] = [];
      for (let i = 0; i < keyed.length; i++) {
        const row = rows[i];
        if (row) results.push(row);
        else unanswered.push(i);
      }
      throw new BatchSendError({
        results,
        unanswered,
        items: keyed,
        failed: { first: chunk.first, last: chunk.end - 1 },
        cause,
      });
    }
  }
  return rows as BatchResult[];
}

/**
 * One call for items [first, end), retried by the transport like every call. Its rows go to `rows`
 * at the caller's indexes. Rows that say the item's key is in use by an attempt still in flight (a
 * retry that overtook the attempt whose answer was lost) are asked again, those items only, until
 * that attempt has finished: then they answer with its outcome.
 */
async function sendChunk(
  transport: Transport,
  items: readonly SendBatchItem[],
  first: number,
  end: number,
  rows: (BatchResult | undefined)[],
  signal: AbortSignal | undefined,
): Promise<void> {
  let pending = Array.from({ length: end - first }, (_, i) => first + i);
  for (let round = 0; ; round++) {
    signal?.throwIfAborted();
    const page = await transport.request<BatchPage>("POST", "/messages/batch", {
      json: { messages: pending.map((i) => items[i]) },
      signal,
    });
    if (page.data.length !== pending.length) {
      throw new Error(`POST /messages/batch answered ${page.data.length} rows for ${pending.length} items`);
    }
    const inUse: number[] = [];
    for (const row of page.data) {
      const index = pending[row.index];
      if (index === undefined) throw new Error(`POST /messages/batch answered a row for item ${row.index}`);
      if (row.error?.code === "idempotency_key_in_use" && round < IN_USE_RETRIES) inUse.push(index);
      else rows[index] = { ...row, index };
    }
    if (inUse.length === 0) return;
    pending = inUse;
    await sleep(IN_USE_WAIT_MS + Math.random() * 250, signal);
  }
}
