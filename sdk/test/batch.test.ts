import { describe, expect, test } from "bun:test";
import {
  ApiError,
  type BatchResult,
  BatchSendError,
  MessagingClient,
  type SendBatchItem,
} from "../src/index.ts";

/**
 * `messages.sendBatch` against a stub fetch (no service): how items are cut into calls, where each
 * row lands, the keys every retry reuses, items whose key is still in use, and what a failure says.
 * client.test.ts runs it against the real service.
 */

const json = (body: unknown, init: ResponseInit = {}) =>
  new Response(JSON.stringify(body), {
    ...init,
    headers: { "content-type": "application/json", ...(init.headers as Record<string, string>) },
  });
const errorAnswer = (status: number, code: string, headers: Record<string, string> = {}) =>
  json({ error: { type: "api_error", code, message: `stub ${code}` } }, { status, headers });

type Item = SendBatchItem;
interface BatchCall {
  items: Item[];
}

/**
 * A client whose batch calls are answered by `answer` (the call's number from 0 and its items);
 * by default each item accepted (201) with a message whose client_reference is the item's.
 */
function stubClient(answer?: (call: number, items: Item[]) => Response | "network-error" | undefined) {
  const calls: BatchCall[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const client = new MessagingClient({
    baseUrl: "https://api.example.test/v2",
    clientId: "cid_test",
    clientSecret: "csec_test",
    retry: { baseDelayMs: 1, maxDelayMs: 2, maxAttempts: 3 },
    fetch: async (input, init) => {
      const url = new URL(input);
      if (url.pathname === "/v2/oauth/token") {
        return json({ access_token: "at_test", token_type: "bearer", expires_in: 3600 });
      }
      expect(url.pathname).toBe("/v2/messages/batch");
      expect(new Headers(init?.headers).has("idempotency-key")).toBe(false);
      const { messages } = JSON.parse(String(init?.body)) as { messages: Item[] };
      calls.push({ items: messages });
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        await Bun.sleep(1);
        const custom = answer?.(calls.length - 1, messages);
        if (custom === "network-error") throw new TypeError("fetch failed: connection reset");
        return custom ?? accepted(messages);
      } finally {
        inFlight--;
      }
    },
  });
  return { client, calls, maxInFlight: () => maxInFlight };
}

const message = (item: Item, status = "accepted") => ({
  object: "message",
  id: `msg_${item.client_reference}`,
  status,
  client_reference: item.client_reference ?? null,
});
const row = (index: number, status: number, item: Item, error: unknown = null) => ({
  object: "batch_result",
  index,
  status,
  message: error ? null : message(item),
  error,
});
const accepted = (items: Item[], status = 201) =>
  json({
    object: "list",
    url: "/v2/messages/batch",
    has_more: false,
    data: items.map((item, i) => row(i, status, item)),
  });

const items = (n: number): Item[] =>
  Array.from({ length: n }, (_, i) => ({
    to: `+49151${String(i).padStart(8, "0")}`,
    template: { name: "order_shipped", variables: { body: ["Ana", `A-${i}`] } },
    client_reference: `ref-${i}`,
  }));

describe("sendBatch, cut into calls", () => {
  test("2,500 items: three calls of 1,000, 1,000 and 500, one after another; rows in order, indexes the caller's", async () => {
    const { client, calls, maxInFlight } = stubClient();
    const results = await client.messages.sendBatch(items(2500));
    expect(calls.map((call) => call.items.length)).toEqual([1000, 1000, 500]);
    expect(maxInFlight()).toBe(1);
    expect(results).toHaveLength(2500);
    results.forEach((result, i) => {
      expect(result.index).toBe(i);
      expect(result.message?.client_reference).toBe(`ref-${i}`);
    });
  });

  test("no items: no call", async () => {
    const { client, calls } = stubClient();
    expect(await client.messages.sendBatch([])).toEqual([]);
    expect(calls).toHaveLength(0);
  });

  test("a call stays under 4 MB: large items make smaller calls", async () => {
    const { client, calls } = stubClient();
    // ~100 KB each: 41 fit in 4 MB (4,194,304 bytes with the envelope and commas), not 1,000.
    const large = items(100).map((item) => ({ ...item, recipient_name: "x".repeat(100_000) }));
    const results = await client.messages.sendBatch(large);
    expect(results.map((r) => r.index)).toEqual(large.map((_, i) => i));
    for (const call of calls) {
      expect(new TextEncoder().encode(JSON.stringify({ messages: call.items })).length).toBeLessThanOrEqual(
        4 * 1024 * 1024,
      );
    }
    expect(calls.map((call) => call.items.length)).toEqual([41, 41, 18]);
  });
});

describe("sendBatch, keys and retries", () => {
  test("an item without a key gets a random one, made once: the retry after a lost answer and a 503 sends the same keys", async () => {
    const { client, calls } = stubClient((call, sent) => {
      if (call === 0) return "network-error";
      if (call === 1) return errorAnswer(503, "service_unavailable", { "retry-after": "0" });
      return accepted(sent, 200);
    });
    const mine = { ...items(1)[0]!, idempotency_key: "order-A-0" };
    const results = await client.messages.sendBatch([mine, ...items(2).slice(1)]);
    expect(calls).toHaveLength(3);
    const keys = calls.map((call) => call.items.map((item) => item.idempotency_key));
    expect(keys[0]![0]).toBe("order-A-0");
    expect(keys[0]![1]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toEqual(keys[0]!);
    expect(keys[2]).toEqual(keys[0]!);
    expect(results.map((r) => r.status)).toEqual([200, 200]);
    // The caller's items are left as they were.
    expect(mine.idempotency_key).toBe("order-A-0");
  });

  test("two sendBatch calls of the same items make different keys", async () => {
    const { client, calls } = stubClient();
    const same = items(1);
    await client.messages.sendBatch(same);
    await client.messages.sendBatch(same);
    expect(calls[0]!.items[0]!.idempotency_key).not.toBe(calls[1]!.items[0]!.idempotency_key);
    expect("idempotency_key" in same[0]!).toBe(false);
  });

  test("rows whose key is still in use by an attempt in flight are asked again, those items only, with their keys", async () => {
    const { client, calls } = stubClient((call, sent) => {
      if (call !== 0) return accepted(sent, 200);
      return json({
        object: "list",
        url: "/v2/messages/batch",
        has_more: false,
        data: sent.map((item, i) =>
          i === 1 || i === 3
            ? row(i, 409, item, {
                type: "invalid_request_error",
                code: "idempotency_key_in_use",
                message: "in use",
                param: "idempotency_key",
              })
            : row(i, 201, item),
        ),
      });
    });
    const started = Date.now();
    const results = await client.messages.sendBatch(items(5));
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000); // the API's Retry-After: 1
    expect(calls.map((call) => call.items.map((item) => item.client_reference))).toEqual([
      ["ref-0", "ref-1", "ref-2", "ref-3", "ref-4"],
      ["ref-1", "ref-3"],
    ]);
    expect(calls[1]!.items.map((item) => item.idempotency_key)).toEqual([
      calls[0]!.items[1]!.idempotency_key,
      calls[0]!.items[3]!.idempotency_key,
    ]);
    expect(results.map((r) => [r.index, r.status])).toEqual([
      [0, 201],
      [1, 200],
      [2, 201],
      [3, 200],
      [4, 201],
    ]);
  });

  test("a refused item is its row, not an error", async () => {
    const { client } = stubClient((_, sent) =>
      json({
        object: "list",
        url: "/v2/messages/batch",
        has_more: false,
        data: sent.map((item, i) =>
          i === 1
            ? row(i, 429, item, { type: "rate_limit_error", code: "quota_exceeded", message: "quota" })
            : row(i, 201, item),
        ),
      }),
    );
    const results = await client.messages.sendBatch(items(2));
    expect(results.map((r: BatchResult) => [r.status, r.error?.code ?? null])).toEqual([
      [201, null],
      [429, "quota_exceeded"],
    ]);
  });
});

describe("sendBatch, a call that fails", () => {
  test("503 after the retries on the second call: BatchSendError with the first call's rows, the rest unanswered, the keys to resume with", async () => {
    const { client, calls } = stubClient((call) =>
      call >= 1 ? errorAnswer(503, "service_unavailable", { "retry-after": "0" }) : undefined,
    );
    const error = await client.messages.sendBatch(items(2100)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BatchSendError);
    const failed = error as BatchSendError;
    expect(calls.map((call) => call.items.length)).toEqual([1000, 1000, 1000, 1000]); // 1 + 3 attempts
    expect(failed.results).toHaveLength(1000);
    expect(failed.results.map((r) => r.index)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    expect(failed.unanswered).toEqual(Array.from({ length: 1100 }, (_, i) => 1000 + i));
    expect(failed.cause).toBeInstanceOf(ApiError);
    expect(failed.cause).toMatchObject({ status: 503, code: "service_unavailable" });
    expect(failed.message).toContain("1000 of 2100 items answered");
    expect(failed.message).toContain("the call for items 1000-1999 failed (503 service_unavailable)");
    expect(failed.message).toContain("may have been accepted");
    expect(failed.message).toContain("items 2000-2099 were never sent");
    // The keys the failed call carried, to send the rest again.
    expect(failed.items[1000]!.idempotency_key).toBe(calls[1]!.items[0]!.idempotency_key);
    const { client: again, calls: resumed } = stubClient();
    const rest = await again.messages.sendBatch(failed.unanswered.map((i) => failed.items[i]!));
    expect(rest).toHaveLength(1100);
    expect(resumed[0]!.items[0]!.idempotency_key).toBe(calls[1]!.items[0]!.idempotency_key);
  });

  test("a call refused whole (403) is not retried, and says nothing of it was accepted", async () => {
    const { client, calls } = stubClient(() =>
      json(
        { error: { type: "permission_error", code: "insufficient_scope", message: "needs messaging:send" } },
        { status: 403 },
      ),
    );
    const error = (await client.messages.sendBatch(items(3)).catch((e: unknown) => e)) as BatchSendError;
    expect(error).toBeInstanceOf(BatchSendError);
    expect(calls).toHaveLength(1);
    expect(error.results).toEqual([]);
    expect(error.unanswered).toEqual([0, 1, 2]);
    expect(error.message).toContain("was refused whole (403 insufficient_scope)");
    expect(error.message).not.toContain("may have been accepted");
  });

  test("an abort between calls: BatchSendError whose cause is the reason", async () => {
    const stop = new AbortController();
    const { client, calls } = stubClient((call, sent) => {
      if (call === 0) stop.abort(new Error("stopped by the caller"));
      return accepted(sent);
    });
    const error = (await client.messages
      .sendBatch(items(1500), { signal: stop.signal })
      .catch((e: unknown) => e)) as BatchSendError;
    expect(error).toBeInstanceOf(BatchSendError);
    expect(calls).toHaveLength(1);
    expect(error.results).toHaveLength(1000);
    expect((error.cause as Error).message).toBe("stopped by the caller");
  });
});
