import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  GRAPH_ERROR_CODES,
  MESSAGE_FAILURE_CODES,
  MESSAGE_FAILURES,
  PROVIDER_FAILURE_CODES,
  PROVIDER_FALLBACK_CODES,
} from "../../src/channel/failure-codes.ts";
import { normalizeProviderError } from "../../src/channel/provider.ts";
import { systemClock } from "../../src/clock.ts";
import { sequenceFeed } from "../../src/feed/sequencer.ts";
import { deliverBatch } from "../../src/outbound/send.ts";
import { enqueueSendRetries } from "../../src/queues/index.ts";
import { createShop, failNextSends, postMessage } from "../support/fixtures.ts";
import { call, createTestEnv, eventually, spawnWorker, type TestEnv } from "../support/index.ts";

/**
 * Issue 24, items 1 and 2: every failure code is documented (one catalogue: the provider mapping's
 * codes, /v2/docs, the OpenAPI enum), and a message waiting for a retry says so (`retrying` on GET
 * /messages/{id} and in history; the retry job's data carries the last error).
 */
let env: TestEnv;
let token: string;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, statusDelayMs: 600_000 });
  ({ token } = await createShop(env, "Acme", { sendLimit: 1000, templates: true }));
});
afterAll(() => env.close());

/** Every code the provider mapping can produce: its table's, each Graph code normalized, the fallbacks. */
function mappedCodes(): string[] {
  const codes = new Set<string>();
  for (const [graphCodes, code] of GRAPH_ERROR_CODES) {
    codes.add(code);
    for (const graphCode of graphCodes) codes.add(normalizeProviderError(graphCode, "x", 400).code);
  }
  for (const code of Object.values(PROVIDER_FALLBACK_CODES)) codes.add(code);
  for (const status of [400, 401, 429, 500, 503, undefined]) {
    codes.add(normalizeProviderError(undefined, "x", status).code);
    codes.add(normalizeProviderError(999_999, "x", status).code);
  }
  return [...codes];
}

describe("one catalogue of failure codes", () => {
  test("the mapping produces only catalogued codes, with the catalogue's retry verdict", () => {
    const mapped = mappedCodes();
    expect(mapped.length).toBeGreaterThanOrEqual(10);
    for (const code of mapped) expect(MESSAGE_FAILURE_CODES, code).toContain(code as never);
    expect(new Set(PROVIDER_FAILURE_CODES)).toEqual(new Set(mapped as never[]));
    for (const [graphCodes, code] of GRAPH_ERROR_CODES) {
      for (const graphCode of graphCodes) {
        expect(normalizeProviderError(graphCode, "x", 400)).toMatchObject({
          code,
          retryable: MESSAGE_FAILURES[code].retryable,
        });
      }
    }
    // The service's own codes are in it too.
    for (const code of ["sender_inactive", "expired", "messaging_window_closed", "recipient_opted_out"]) {
      expect(MESSAGE_FAILURE_CODES).toContain(code as never);
    }
  });

  test("GET /v2/docs has an entry at #failure-<code> for every code, and no id twice", async () => {
    const page = await call(env.app, "GET", "/v2/docs");
    expect(page.status).toBe(200);
    const html = page.text;
    const ids = [...html.matchAll(/\sid="([^"]+)"/g)].map((m) => m[1]!);
    expect(ids.length).toBe(new Set(ids).size);
    for (const code of new Set([...mappedCodes(), ...MESSAGE_FAILURE_CODES])) {
      expect(ids, code).toContain(`failure-${code}`);
      const section = html.slice(html.indexOf(`id="failure-${code}"`)).split("</section>")[0]!;
      expect(section).toContain(`href="#failure-${code}"`);
      expect(section).toContain("What to do:");
      expect(section).toContain(
        MESSAGE_FAILURES[code as keyof typeof MESSAGE_FAILURES].retryable ? "retryable" : "not retryable",
      );
    }
    // A code that is also an API error keeps its API anchor (every error's doc_url) and links to it.
    expect(ids).toContain("recipient_opted_out");
    expect(ids).toContain("messaging_window_closed");
    const optedOut = html.slice(html.indexOf('id="failure-recipient_opted_out"')).split("</section>")[0]!;
    expect(optedOut).toContain('href="#recipient_opted_out"');
  });

  test("OpenAPI: MessageFailure.code is the enum of the catalogue's codes, each described", async () => {
    const served = await call(env.app, "GET", "/v2/openapi.json");
    expect(served.status).toBe(200);
    const schemas = served.body.components.schemas;
    expect(schemas.MessageFailure.properties.code).toEqual({
      $ref: "#/components/schemas/MessageFailureCode",
    });
    const enumSchema = schemas.MessageFailureCode;
    expect(enumSchema.type).toBe("string");
    expect(enumSchema.enum).toEqual(MESSAGE_FAILURE_CODES);
    for (const code of mappedCodes()) expect(enumSchema.enum, code).toContain(code);
    for (const code of MESSAGE_FAILURE_CODES) {
      expect(enumSchema["x-enumDescriptions"][code], code).toEqual(expect.any(String));
      expect(enumSchema.description).toContain(`\`${code}\``);
    }
    // The retry state is documented on Message and HistoryMessage, not on FeedMessage.
    expect(schemas.MessageRetrying.properties.last_error).toEqual({
      $ref: "#/components/schemas/MessageFailure",
    });
    expect(schemas.Message.required).toContain("retrying");
    expect(schemas.HistoryMessage.required).toContain("retrying");
    expect(schemas.FeedMessage.properties.retrying).toBeUndefined();
  });
});

describe("retry state", () => {
  const send = (to: string) =>
    postMessage(env.app, token, {
      to,
      template: { name: "order_shipped", language: "en", variables: { body: ["Ana", "A-1"] } },
    });
  const get = (id: string) => call(env.app, "GET", `/v2/messages/${id}`, { token });
  const historyOf = async (contactId: string, id: string) => {
    const page = await call(env.app, "GET", `/v2/contacts/${contactId}/messages?order=desc`, { token });
    expect(page.status).toBe(200);
    return page.body.data.find((m: { id: string }) => m.id === id);
  };
  const row = (id: string) =>
    env.deps.db
      .selectFrom("messages")
      .select(["status", "send_attempts", "send_not_before", "last_error", "failure"])
      .where("id", "=", id)
      .executeTakeFirstOrThrow();

  test("a retryable failure shows `retrying` on GET and in history until the retry sends it", async () => {
    const accepted = await send("+4915204000001");
    expect(accepted.status).toBe(201);
    expect(accepted.body.retrying).toBeNull();
    const { id } = accepted.body;
    const contactId = accepted.body.to.id;

    // The first attempt meets a temporary fault of the provider (131000): tried again later.
    await failNextSends(env, 1, 131000);
    const deps = { ...env.deps, clock: systemClock };
    const first = await deliverBatch(deps, [id]);
    expect(first.outcomes.get(id)).toBe("retry");
    expect(first.later).toEqual([
      {
        messageId: id,
        dueAt: expect.any(Number),
        lastError: { code: "provider_unavailable", message: expect.any(String) },
      },
    ]);

    const waiting = await row(id);
    expect(waiting.last_error).toEqual({
      code: "provider_unavailable",
      message: expect.stringContaining("131000"),
      retryable: true,
    });
    const expected = {
      attempts: 1,
      next_attempt_at: Math.floor(waiting.send_not_before!.getTime() / 1000),
      last_error: waiting.last_error,
    };
    const looked = await get(id);
    expect(looked.status).toBe(200);
    expect(looked.body).toMatchObject({ status: "accepted", failure: null, retrying: expected });
    expect((await historyOf(contactId, id)).retrying).toEqual(expected);
    // The feed hands a message out once: it shows no retry state.
    while ((await sequenceFeed(env.deps.db)).taken > 0);
    const feed = await call(env.app, "GET", "/v2/messages", { token });
    const inFeed = feed.body.data.find((m: { id: string }) => m.id === id);
    expect(inFeed).toBeDefined();
    expect("retrying" in inFeed).toBe(false);

    // Once due, the retry sends it: no retry state, last_error cleared.
    await Bun.sleep(Math.max(0, first.later[0]!.dueAt - Date.now()) + 20);
    expect((await deliverBatch(deps, [id])).outcomes.get(id)).toBe("sent");
    expect(await row(id)).toMatchObject({
      status: "sent",
      send_attempts: 2,
      last_error: null,
      failure: null,
    });
    expect((await get(id)).body).toMatchObject({ status: "sent", retrying: null });
    expect((await historyOf(contactId, id)).retrying).toBeNull();
  });

  test("a message that fails for good after a retry keeps only its failure", async () => {
    const accepted = await send("+4915204000002");
    const { id } = accepted.body;
    for (const code of [131000, 131026]) {
      await failNextSends(env, 1, code);
    }
    const deps = { ...env.deps, clock: systemClock };
    const first = await deliverBatch(deps, [id]);
    expect(first.outcomes.get(id)).toBe("retry");
    expect((await get(id)).body.retrying).toMatchObject({
      attempts: 1,
      last_error: { code: "provider_unavailable" },
    });
    await Bun.sleep(Math.max(0, first.later[0]!.dueAt - Date.now()) + 20);
    expect((await deliverBatch(deps, [id])).outcomes.get(id)).toBe("failed");
    expect(await row(id)).toMatchObject({ status: "failed", last_error: null });
    const looked = await get(id);
    expect(looked.body).toMatchObject({
      status: "failed",
      failure: { code: "recipient_invalid", retryable: false },
      retrying: null,
    });
  });

  test("a throttled send (the sandbox's +15550001008) retries with its error in the delayed job's data", async () => {
    const worker = spawnWorker(env, "send");
    try {
      const accepted = await send("+15550001008");
      expect(accepted.status).toBe(201);
      const { id } = accepted.body;
      const job = await eventually(async () => {
        const delayed = await env.deps.queues.send.getDelayed();
        return delayed.find((j) => j.data.messageIds.includes(id));
      }, 15_000);
      expect(job.name).toBe("retry");
      expect(job.id).toStartWith(`retry-${id}-`);
      expect(job.data.lastError).toEqual({
        code: "provider_rate_limited",
        message: expect.stringContaining("130429"),
      });
      const looked = await get(id);
      expect(looked.body.status).toBe("accepted");
      expect(looked.body.failure).toBeNull();
      const { attempts, last_error } = looked.body.retrying;
      expect(attempts).toBeGreaterThanOrEqual(1);
      expect(last_error).toMatchObject({ code: "provider_rate_limited", retryable: true });
    } finally {
      await worker.stop();
    }
  }, 30_000);

  test("retries due together share a job per error code; the job id names its first message", async () => {
    const dueAt = Date.now() + 60_000;
    await enqueueSendRetries(
      env.deps.queues.send,
      [
        {
          messageId: "msg_groupA1",
          dueAt,
          lastError: { code: "provider_rate_limited", message: "slow down" },
        },
        {
          messageId: "msg_groupA2",
          dueAt,
          lastError: { code: "provider_rate_limited", message: "slow down" },
        },
        { messageId: "msg_groupB1", dueAt, lastError: { code: "provider_unavailable", message: "down" } },
        { messageId: "msg_groupC1", dueAt },
      ],
      100,
    );
    const jobs = (await env.deps.queues.send.getDelayed()).filter((j) =>
      j.data.messageIds.some((m) => m.startsWith("msg_group")),
    );
    const byFirst = Object.fromEntries(jobs.map((j) => [j.data.messageIds[0]!, j]));
    expect(Object.keys(byFirst).sort()).toEqual(["msg_groupA1", "msg_groupB1", "msg_groupC1"]);
    expect(byFirst.msg_groupA1!.data).toEqual({
      messageIds: ["msg_groupA1", "msg_groupA2"],
      lastError: { code: "provider_rate_limited", message: "slow down" },
    });
    expect(byFirst.msg_groupB1!.data.lastError?.code).toBe("provider_unavailable");
    expect(byFirst.msg_groupC1!.data).toEqual({ messageIds: ["msg_groupC1"] });
    expect(byFirst.msg_groupA1!.id).toStartWith("retry-msg_groupA1-");
    await Promise.all(jobs.map((j) => j.remove()));
  });
});
