import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EVENT_TYPES } from "../../src/events/schemas.ts";
import { createShop, customerWrites, freshPhone, receive, type Shop } from "../../test/support/fixtures.ts";
import {
  call,
  createTestEnv,
  eventually,
  nextSecond,
  spawnWorker,
  type TestEnv,
  type WorkerProcess,
} from "../../test/support/index.ts";
import { startTcpProxy } from "../../test/support/tcp-proxy.ts";
import { buildForNode } from "../scripts/build.ts";
import {
  ApiError,
  type FeedMessage,
  type MessageEvent,
  MessagingClient,
  type MessagingClientOptions,
} from "../src/index.ts";

/**
 * The SDK against the real service: the api listening on a port, the send, status and finalize
 * workers as processes, and the provider simulator; every call goes over HTTP through the SDK.
 */
let env: TestEnv;
let workers: WorkerProcess[] = [];
let tenantCounter = 0;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  workers = ["send", "status", "finalize"].map((name) => spawnWorker(env, name));
  // Pushes to the example receiver; a refused delivery is retried within a fraction of a second here.
  workers.push(spawnWorker(env, "webhook", { WEBHOOK_RETRY_BASE_MS: "100" }));
});
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.stop()));
  await env.close();
});

interface Attempt {
  method: string;
  path: string;
  /** 0 while in flight, or when the connection failed. */
  status: number;
  at: number;
  retryAfter: string | null;
}

/** A client of `tenant` whose every HTTP attempt is recorded. */
function sdkFor(tenant: Shop, options: Partial<MessagingClientOptions> = {}) {
  const attempts: Attempt[] = [];
  const client = new MessagingClient({
    baseUrl: `${env.apiUrl}/v2`,
    clientId: tenant.clientId,
    clientSecret: tenant.clientSecret,
    retry: { baseDelayMs: 50 },
    fetch: async (input, init) => {
      const attempt: Attempt = {
        method: init?.method ?? "GET",
        path: new URL(input).pathname,
        status: 0,
        at: Date.now(),
        retryAfter: null,
      };
      attempts.push(attempt);
      const response = await fetch(input, init);
      attempt.status = response.status;
      attempt.retryAfter = response.headers.get("retry-after");
      return response;
    },
    ...options,
  });
  const count = (method: string, path: string) =>
    attempts.filter((a) => a.method === method && a.path === `/v2${path}`).length;
  return { client, attempts, count };
}

/** Runs a command to its end; its output and exit code. */
async function run(cmd: string[], extraEnv: Record<string, string> = {}) {
  const proc = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe", env: { ...process.env, ...extraEnv } });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { out, err, code };
}

function shop(options: Parameters<typeof createShop>[2] = {}): Promise<Shop> {
  return createShop(env, `SDK shop ${++tenantCounter}`, { ...options, templates: true });
}

const orderShipped = (to: string, order: string) => ({
  to,
  template: { name: "order_shipped", language: "en", variables: { body: ["Ada", order] } },
});

describe("tokens", () => {
  test("20 concurrent calls share one token request", async () => {
    const { client, count } = sdkFor(await shop());
    const lists = await Promise.all(Array.from({ length: 20 }, () => client.senders.list()));
    expect(lists.every((senders) => senders.length === 1 && senders.data[0]?.object === "sender")).toBe(true);
    expect(count("POST", "/oauth/token")).toBe(1);
    expect(count("GET", "/senders")).toBe(20);
  });

  test("accessToken() is the token the next call sends, from the same one token request", async () => {
    const { client, count } = sdkFor(await shop());
    const token = await client.accessToken();
    const direct = await fetch(`${env.apiUrl}/v2/senders`, { headers: { authorization: `Bearer ${token}` } });
    expect(direct.status).toBe(200);
    await client.senders.list();
    expect(await client.accessToken()).toBe(token);
    expect(count("POST", "/oauth/token")).toBe(1);
  });

  test("a token the server finds expired is renewed once, and the call goes through", async () => {
    const { client, attempts, count } = sdkFor(await shop());
    await client.senders.list();
    // The server's clock moves past the token's hour; the client's does not know. (Moved back
    // after: the quota test counts the day by it.)
    env.clock.advance(3700);
    await nextSecond(); // the token endpoint takes two a second per client
    const senders = await client.senders.list().finally(() => env.clock.advance(-3700));
    expect(senders).toHaveLength(1);
    expect(count("POST", "/oauth/token")).toBe(2);
    expect(attempts.map((a) => `${a.method} ${a.path} ${a.status}`)).toEqual([
      "POST /v2/oauth/token 200",
      "GET /v2/senders 200",
      "GET /v2/senders 401",
      "POST /v2/oauth/token 200",
      "GET /v2/senders 200",
    ]);
  });

  test("a token about to expire is renewed before the call, without a 401", async () => {
    let now = Date.now();
    const { client, attempts } = sdkFor(await shop(), { now: () => now });
    await client.senders.list();
    now += (3600 - 30) * 1000; // inside the 60-second renewal margin
    await nextSecond(); // the token endpoint takes two a second per client
    await client.senders.list();
    expect(attempts.map((a) => `${a.method} ${a.path} ${a.status}`)).toEqual([
      "POST /v2/oauth/token 200",
      "GET /v2/senders 200",
      "POST /v2/oauth/token 200",
      "GET /v2/senders 200",
    ]);
  });

  test("wrong credentials surface as ApiError invalid_client", async () => {
    const tenant = await shop();
    const { client } = sdkFor({ ...tenant, clientSecret: "csec_wrong" });
    const error = await client.senders.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 401, type: "authentication_error", code: "invalid_client" });
  });
});

describe("retries", () => {
  test("429 rate_limit_exceeded waits Retry-After and retries", async () => {
    const { client, attempts } = sdkFor(await shop({ readLimit: 2 }));
    await nextSecond();
    const lists = await Promise.all(Array.from({ length: 5 }, () => client.senders.list()));
    expect(lists.every((senders) => senders.length === 1)).toBe(true);
    const limited = attempts.filter((a) => a.status === 429);
    expect(limited.length).toBeGreaterThan(0);
    const calls = attempts.filter((a) => a.path === "/v2/senders");
    // After the five first attempts, one retry per 429, none before Retry-After has passed.
    const retries = calls.slice(5);
    expect(retries).toHaveLength(limited.length);
    const firstLimited = limited[0]!;
    expect(Number(firstLimited.retryAfter)).toBeGreaterThanOrEqual(1);
    for (const retry of retries) {
      expect(retry.at - firstLimited.at).toBeGreaterThanOrEqual(Number(firstLimited.retryAfter) * 1000);
    }
  });

  test("the token endpoint's 429 is waited out too", async () => {
    const tenant = await shop();
    // Four clients of one application want a token in the same second; the endpoint takes two.
    const clients = Array.from({ length: 4 }, () => sdkFor(tenant));
    await nextSecond();
    const lists = await Promise.all(clients.map(({ client }) => client.senders.list()));
    expect(lists.every((senders) => senders.length === 1)).toBe(true);
    const tokenStatuses = clients.flatMap(({ attempts }) =>
      attempts.filter((a) => a.path === "/v2/oauth/token").map((a) => a.status),
    );
    expect(tokenStatuses.filter((status) => status === 429).length).toBeGreaterThan(0);
    expect(tokenStatuses.filter((status) => status === 200)).toHaveLength(4);
  });

  test("messages.get: the Message with its client_reference; an unknown id is ApiError resource_missing", async () => {
    const { client } = sdkFor(await shop());
    const sent = await client.messages.send({
      ...orderShipped(freshPhone(), "G-1"),
      client_reference: "order G-1",
    });
    const found = await client.messages.get(sent.id);
    // The send worker may have handed it to the provider already: only its status may have moved on.
    expect(["accepted", "sent", "delivered", "read"]).toContain(found.status!);
    expect({ ...found, status: sent.status }).toEqual(sent);
    expect(found.client_reference).toBe("order G-1");
    const error = await client.messages.get("msg_unknown").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 404, code: "resource_missing" });
  });

  test("quota_exceeded is thrown at once, with when the quota resets", async () => {
    const { client, count } = sdkFor(await shop({ dailyQuota: 1 }));
    const first = await client.messages.send(orderShipped(freshPhone(), "Q-1"));
    expect(first.status).toBe("accepted");
    const before = Date.now();
    const error = await client.messages.send(orderShipped(freshPhone(), "Q-2")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    const quota = error as ApiError;
    expect(quota).toMatchObject({ status: 429, type: "rate_limit_error", code: "quota_exceeded" });
    expect(quota.retryAfter).toBeGreaterThan(0);
    expect(quota.resetsAt!.getTime()).toBeGreaterThan(before);
    expect(quota.requestId).toStartWith("req_");
    expect(quota.docUrl).toContain("#quota_exceeded");
    expect(count("POST", "/messages")).toBe(2);
  });

  test("a send whose answer is lost is retried with its key and creates one message", async () => {
    const tenant = await shop();
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: Number(new URL(env.apiUrl).port) });
    try {
      const { client, attempts } = sdkFor(tenant, {
        baseUrl: `http://127.0.0.1:${proxy.port}/v2`,
      });
      await client.senders.list(); // the token, fetched before the connection is cut
      proxy.dropNextAnswer();
      const to = freshPhone();
      const message = await client.messages.send(orderShipped(to, "D-1"));
      const sends = attempts.filter((a) => a.path === "/v2/messages");
      expect(sends.map((a) => a.status)).toEqual([0, 200]); // dropped, then the replay
      const stored = await env.deps.db
        .selectFrom("messages")
        .select("id")
        .where("tenant_id", "=", tenant.tenantId)
        .where("direction", "=", "outbound")
        .execute();
      expect(stored.map((row) => row.id)).toEqual([message.id]);
      // And the provider got it once.
      const sent = await eventually(async () => {
        const response = await fetch(`${env.simulatorUrl}/_sim/sent?phone_number_id=${tenant.phoneNumberId}`);
        const { data } = (await response.json()) as { data: unknown[] };
        return data.length > 0 ? data : undefined;
      });
      await Bun.sleep(300);
      expect(sent).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  });
});

/** The server's clock in Unix seconds (a test may move it; `send_at` is checked against it). */
const serverNow = () => Math.floor(env.clock.now().getTime() / 1000);

/** A shop whose sender hands the provider thousands of messages a second: big batches drain at once. */
async function fastShop(): Promise<Shop> {
  const tenant = await shop();
  await env.deps.db.updateTable("senders").set({ mps: 5000 }).where("id", "=", tenant.sender.id).execute();
  return tenant;
}

/** What the simulator received from the tenant's sender, by our message id. */
async function sentByMessage(tenant: Shop): Promise<Map<string, number>> {
  const response = await fetch(`${env.simulatorUrl}/_sim/sent?phone_number_id=${tenant.phoneNumberId}`);
  const { data } = (await response.json()) as { data: { payload: { biz_opaque_callback_data?: string } }[] };
  const counts = new Map<string, number>();
  for (const { payload } of data) {
    const id = payload.biz_opaque_callback_data ?? "";
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  return counts;
}

async function storedOutbound(tenant: Shop) {
  return env.deps.db
    .selectFrom("messages")
    .select(["id", "seq", "client_reference", "contact_id"])
    .where("tenant_id", "=", tenant.tenantId)
    .where("direction", "=", "outbound")
    .orderBy("seq")
    .execute();
}

describe("sending at scale", () => {
  test("sendBatch: 1,500 items in two calls, 1,500 rows in the caller's order and indexes, one contact's messages in item order", async () => {
    const tenant = await fastShop();
    const { client, count } = sdkFor(tenant);
    // 750 customers, two messages each: item i and item i + 750 (for i >= 250, in the second call).
    const phones = Array.from({ length: 750 }, () => freshPhone());
    const items = Array.from({ length: 1500 }, (_, i) => ({
      ...orderShipped(phones[i % 750]!, `B-${i}`),
      client_reference: `ref-${i}`,
    }));
    const results = await client.messages.sendBatch(items);
    expect(count("POST", "/messages/batch")).toBe(2);
    expect(results).toHaveLength(1500);
    results.forEach((row, i) => {
      expect(row).toMatchObject({ object: "batch_result", index: i, status: 201, error: null });
      expect(row.message).toMatchObject({ status: "accepted", client_reference: `ref-${i}` });
      expect(row.message!.to.phone).toBe(phones[i % 750]!);
    });
    const stored = await storedOutbound(tenant);
    expect(stored).toHaveLength(1500);
    expect(new Set(stored.map((m) => m.id))).toEqual(new Set(results.map((r) => r.message!.id)));
    // Per contact, the first item is stored (and so handed to the provider) before the second.
    const seqOf = new Map(stored.map((m) => [m.client_reference, Number(m.seq)]));
    for (let i = 0; i < 750; i++) {
      expect(seqOf.get(`ref-${i}`)!).toBeLessThan(seqOf.get(`ref-${i + 750}`)!);
    }
  });

  test("sendBatch: a call whose answer is lost is retried with the same keys, and its items replayed (200), not sent twice", async () => {
    const tenant = await fastShop();
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: Number(new URL(env.apiUrl).port) });
    try {
      const calls: { body: string; status: number }[] = [];
      const client = new MessagingClient({
        baseUrl: `http://127.0.0.1:${proxy.port}/v2`,
        clientId: tenant.clientId,
        clientSecret: tenant.clientSecret,
        retry: { baseDelayMs: 50 },
        fetch: async (input, init) => {
          if (new URL(input).pathname !== "/v2/messages/batch") return fetch(input, init);
          const call = { body: String(init?.body), status: 0 };
          calls.push(call);
          // The second call (items 1,000-1,009) is received and acted on, and its answer lost.
          if (calls.length === 2) proxy.dropNextAnswer();
          const response = await fetch(input, init);
          call.status = response.status;
          return response;
        },
      });
      const items = Array.from({ length: 1010 }, (_, i) => ({
        ...orderShipped(freshPhone(), `R-${i}`),
        client_reference: `ref-${i}`,
      }));
      const results = await client.messages.sendBatch(items);
      expect(calls.map((call) => call.status)).toEqual([200, 0, 200]);
      // The retry sent the same items with the same (SDK-made) keys.
      expect(calls[2]!.body).toBe(calls[1]!.body);
      const keys = (JSON.parse(calls[1]!.body) as { messages: { idempotency_key: string }[] }).messages;
      expect(keys).toHaveLength(10);
      expect(new Set(keys.map((item) => item.idempotency_key)).size).toBe(10);
      expect(results.map((row) => row.index)).toEqual(items.map((_, i) => i));
      expect(results.slice(0, 1000).every((row) => row.status === 201)).toBe(true);
      expect(results.slice(1000).map((row) => row.status)).toEqual(Array(10).fill(200));
      expect(results.slice(1000).map((row) => row.message?.client_reference)).toEqual(
        items.slice(1000).map((item) => item.client_reference),
      );
      expect(await storedOutbound(tenant)).toHaveLength(1010);
      // And the provider got each replayed item once.
      const replayed = results.slice(1000).map((row) => row.message!.id);
      const sent = await eventually(async () => {
        const counts = await sentByMessage(tenant);
        return replayed.every((id) => counts.has(id)) && counts;
      }, 30_000);
      await Bun.sleep(300);
      expect(replayed.map((id) => sent.get(id))).toEqual(Array(10).fill(1));
    } finally {
      await proxy.close();
    }
  });

  test("messages.cancel: a scheduled message is canceled (and canceling it again answers the same)", async () => {
    const { client, count } = sdkFor(await shop());
    const sendAt = serverNow() + 3600;
    const scheduled = await client.messages.send({
      ...orderShipped(freshPhone(), "C-1"),
      send_at: sendAt,
      valid_for: 600,
      client_reference: "order C-1",
    });
    expect(scheduled).toMatchObject({
      status: "scheduled",
      send_at: sendAt,
      valid_for: 600,
      failure: null,
      client_reference: "order C-1",
    });
    const canceled = await client.messages.cancel(scheduled.id);
    expect(canceled).toEqual({ ...scheduled, status: "canceled" });
    expect((await client.messages.get(scheduled.id)).status).toBe("canceled");
    expect((await client.messages.cancel(scheduled.id)).status).toBe("canceled");
    expect(count("POST", `/messages/${scheduled.id}/cancel`)).toBe(2);
  });

  test("messages.cancel: a message already handed to the provider is ApiError message_not_cancelable (409), not retried", async () => {
    const { client, count } = sdkFor(await shop());
    const message = await client.messages.send(orderShipped(freshPhone(), "C-2"));
    await eventually(async () => (await client.messages.get(message.id)).status !== "accepted", 30_000);
    const error = await client.messages.cancel(message.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({
      status: 409,
      type: "invalid_request_error",
      code: "message_not_cancelable",
      param: "message_id",
    });
    expect((error as ApiError).docUrl).toContain("#message_not_cancelable");
    expect(count("POST", `/messages/${message.id}/cancel`)).toBe(1);
    const missing = await client.messages.cancel("msg_unknown").catch((e: unknown) => e);
    expect(missing).toMatchObject({ status: 404, code: "resource_missing" });
  });
});

describe("reading", () => {
  test("contacts, and history followed page by page in both orders", async () => {
    const tenant = await shop();
    const phone = freshPhone();
    const start = Math.floor(Date.now() / 1000) - 100;
    const ids: string[] = [];
    let contactId = "";
    for (let i = 0; i < 5; i++) {
      const got = await receive(env, tenant, {
        from: phone,
        type: "text",
        text: `m${i}`,
        timestamp: start + i,
      });
      ids.push(got.messageId);
      contactId = got.contactId;
    }
    const { client } = sdkFor(tenant);
    const contact = await client.contacts.get(contactId);
    expect(contact).toMatchObject({ object: "contact", id: contactId, phone });
    expect(contact.messaging.within_window).toBe(true);
    expect((await client.contacts.findByPhone(phone)).id).toBe(contactId);
    const missing = await client.contacts.findByPhone(freshPhone()).catch((e: unknown) => e);
    expect(missing).toMatchObject({ status: 404, code: "resource_missing" });

    const asc: string[] = [];
    for await (const message of client.contacts.history(contactId, { pageSize: 2 })) asc.push(message.id!);
    expect(asc).toEqual(ids);
    const desc: string[] = [];
    for await (const message of client.contacts.history(contactId, { order: "desc", pageSize: 2 })) {
      desc.push(message.id!);
    }
    expect(desc).toEqual([...ids].reverse());
  });

  test("contacts.optOut and contacts.optIn: the Contact, opted out and back in", async () => {
    const tenant = await shop();
    const { contactId } = await receive(env, tenant, { from: freshPhone(), type: "text", text: "hi" });
    const { client, attempts } = sdkFor(tenant);
    const out = await client.contacts.optOut(contactId);
    expect(out).toMatchObject({ object: "contact", id: contactId });
    expect(out.messaging).toMatchObject({ opted_out: true, sendable: false });
    expect((await client.contacts.optOut(contactId)).messaging.opted_out).toBe(true);
    expect((await client.contacts.get(contactId)).messaging.opted_out).toBe(true);
    const back = await client.contacts.optIn(contactId);
    expect(back.messaging).toMatchObject({ opted_out: false, sendable: true });
    expect(
      attempts.filter((a) => a.method === "POST" && a.path.includes("/contacts/")).map((a) => a.path),
    ).toEqual([
      `/v2/contacts/${contactId}/opt_out`,
      `/v2/contacts/${contactId}/opt_out`,
      `/v2/contacts/${contactId}/opt_in`,
    ]);
    const missing = await client.contacts.optOut("ctc_doesNotExist0000000000").catch((e: unknown) => e);
    expect(missing).toMatchObject({ status: 404, code: "resource_missing" });
  });

  test("conversations followed page by page", async () => {
    const tenant = await shop();
    const start = Math.floor(Date.now() / 1000) - 200;
    const contacts: string[] = [];
    for (let i = 0; i < 5; i++) {
      const got = await receive(env, tenant, {
        from: freshPhone(),
        type: "text",
        text: "hi",
        timestamp: start + i,
      });
      contacts.push(got.contactId);
    }
    const { client, count } = sdkFor(tenant);
    const newest: string[] = [];
    for await (const conversation of client.conversations.list({ pageSize: 2 })) {
      newest.push(conversation.contact.id);
    }
    expect(newest).toEqual([...contacts].reverse());
    expect(count("GET", "/conversations")).toBe(3);
    const oldest: string[] = [];
    for await (const conversation of client.conversations.list({ order: "asc" })) {
      oldest.push(conversation.contact.id);
    }
    expect(oldest).toEqual(contacts);
  });

  test("media upload", async () => {
    const { client } = sdkFor(await shop());
    const pdf = new TextEncoder().encode("%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n");
    const media = await client.media.upload(pdf, { filename: "invoice.pdf" });
    expect(media).toMatchObject({ object: "media", type: "document", filename: "invoice.pdf" });
    expect(media.id).toStartWith("med_");
  });
});

describe("feed", () => {
  test("a consumer stopped and resumed from its persisted cursor misses nothing", async () => {
    const tenant = await shop();
    const dir = await mkdtemp(join(tmpdir(), "sdk-feed-"));
    const cursorFile = join(dir, "cursor");
    const { client } = sdkFor(tenant);
    const phone = freshPhone();
    const inbound = async (from: number, to: number) => {
      for (let i = from; i < to; i++)
        await customerWrites(env, tenant.phoneNumberId, { from: phone, type: "text", text: `f${i}` });
    };
    const consume = async (stopAfter: (taken: FeedMessage[]) => boolean) => {
      const taken: FeedMessage[] = [];
      const stop = new AbortController();
      const since = await readFile(cursorFile, "utf8").catch(() => undefined);
      const feed = client.feed.consume({
        since,
        limit: 2,
        signal: stop.signal,
        minWaitMs: 50,
        maxWaitMs: 200,
        onCursor: (cursor) => writeFile(cursorFile, cursor),
      });
      const deadline = setTimeout(() => stop.abort(), 20_000);
      for await (const message of feed) {
        taken.push(message);
        if (stopAfter(taken)) stop.abort();
      }
      clearTimeout(deadline);
      return taken;
    };
    try {
      await inbound(0, 5);
      // All five in the feed first, so that the first run reads pages of 2, 2 and 1.
      await eventually(async () => {
        const page = await call(env.app, "GET", "/v2/messages?limit=500", { token: tenant.token });
        return page.body.data.length === 5;
      }, 30_000); // the finalize worker may still be starting when this test runs alone
      // Stopped inside the second page: its cursor must not be persisted.
      const first = await consume((taken) => taken.length === 3);
      expect(first.map((m) => m.text)).toEqual(["f0", "f1", "f2"]);
      await inbound(5, 10);
      const texts = (messages: FeedMessage[]) => messages.map((m) => m.text);
      const second = await consume((taken) => new Set([...texts(first), ...texts(taken)]).size === 10);
      const all = [...first, ...second];
      expect(new Set(texts(all))).toEqual(new Set(Array.from({ length: 10 }, (_, i) => `f${i}`)));
      // Within one run the SDK drops redeliveries.
      expect(new Set(second.map((m) => m.id)).size).toBe(second.length);
      // The second run starts with the page the first was stopped in: f2 again, then on.
      expect(second.map((m) => m.text)).toEqual(["f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("the feed stops on its signal while it waits on an empty page", async () => {
    const { client } = sdkFor(await shop());
    const stop = new AbortController();
    const started = Date.now();
    setTimeout(() => stop.abort(), 300);
    const taken: FeedMessage[] = [];
    for await (const message of client.feed.consume({ signal: stop.signal })) taken.push(message);
    expect(taken).toEqual([]);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe("events", () => {
  test("events.consume follows the event log: received events of inbound messages, types narrowed", async () => {
    const tenant = await shop();
    const { client } = sdkFor(tenant);
    const phone = freshPhone();
    for (let i = 0; i < 3; i++)
      await customerWrites(env, tenant.phoneNumberId, { from: phone, type: "text", text: `e${i}` });
    const stop = new AbortController();
    const deadline = setTimeout(() => stop.abort(), 20_000);
    const cursors: string[] = [];
    const taken: MessageEvent[] = [];
    for await (const event of client.events.consume({
      types: ["message.received"],
      limit: 2,
      signal: stop.signal,
      minWaitMs: 50,
      maxWaitMs: 200,
      onCursor: (cursor) => {
        cursors.push(cursor);
      },
    })) {
      if (event.type !== "contact.merged") taken.push(event);
      if (taken.length === 3) stop.abort();
    }
    clearTimeout(deadline);
    expect(taken.map((e) => [e.type, e.data.text])).toEqual([
      ["message.received", "e0"],
      ["message.received", "e1"],
      ["message.received", "e2"],
    ]);
    expect(cursors[0]).toMatch(/^evc_/);
  });
});

describe("webhook endpoints", () => {
  test("create, list, get, update, rotate the secret, replay, delete: typed, over HTTP", async () => {
    const { client, count } = sdkFor(await shop());
    const created = await client.webhookEndpoints.create({
      url: "https://hooks.example.com/orders",
      description: "orders",
    });
    expect(created).toMatchObject({
      object: "webhook_endpoint",
      url: "https://hooks.example.com/orders",
      events: [...EVENT_TYPES],
      description: "orders",
      status: "enabled",
      disabled_reason: null,
      delivery: { pending: 0, last_failure: null },
    });
    expect(created.id).toStartWith("we_");
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(created.delivery.cursor).toStartWith("evc_");
    const { secret: _secret, ...endpoint } = created;

    const listed = await client.webhookEndpoints.list();
    expect(listed.object).toBe("list");
    expect(listed.map((e) => e.id)).toEqual([created.id]);
    expect(listed[0]).toEqual(endpoint);

    const got = await client.webhookEndpoints.get(created.id);
    expect(got).toEqual(endpoint);
    // The secret is shown on create and rotate only (and WebhookEndpoint has no such field).
    expect("secret" in got).toBe(false);

    const updated = await client.webhookEndpoints.update(created.id, {
      events: ["message.delivered", "message.failed"],
      description: null,
      status: "disabled",
    });
    expect(updated).toMatchObject({
      id: created.id,
      events: ["message.delivered", "message.failed"],
      description: null,
      status: "disabled",
      disabled_reason: null,
    });
    expect((await client.webhookEndpoints.update(created.id, { status: "enabled" })).status).toBe("enabled");

    const rotated = await client.webhookEndpoints.rotateSecret(created.id);
    expect(rotated.id).toBe(created.id);
    expect(rotated.secret).toStartWith("whsec_");
    expect(rotated.secret).not.toBe(created.secret);

    const replayed = await client.webhookEndpoints.replay(created.id, { since: null });
    expect(replayed).toMatchObject({ object: "webhook_endpoint", id: created.id, status: "enabled" });
    expect(replayed.delivery.cursor).toStartWith("evc_");
    const again = await client.webhookEndpoints.replay(created.id, { since: created.delivery.cursor });
    expect(again.delivery.cursor).toBe(created.delivery.cursor);

    expect(await client.webhookEndpoints.delete(created.id)).toEqual({
      object: "webhook_endpoint",
      id: created.id,
      deleted: true,
    });
    expect(await client.webhookEndpoints.list()).toHaveLength(0);
    expect(count("DELETE", `/webhook_endpoints/${created.id}`)).toBe(1);
  });

  test("an unknown or deleted endpoint is ApiError resource_missing (404); a bad url parameter_invalid", async () => {
    const { client, count } = sdkFor(await shop());
    const missing = (call: Promise<unknown>) =>
      call.then(
        () => undefined,
        (e: unknown) => e,
      );
    const { id } = await client.webhookEndpoints.create({ url: "https://hooks.example.com/x" });
    await client.webhookEndpoints.delete(id);
    for (const error of [
      await missing(client.webhookEndpoints.get(id)),
      await missing(client.webhookEndpoints.get("we_0000000000000000000000")),
      await missing(client.webhookEndpoints.update("we_unknown", { description: "x" })),
      await missing(client.webhookEndpoints.delete("we_unknown")),
      await missing(client.webhookEndpoints.rotateSecret("we_unknown")),
      await missing(client.webhookEndpoints.replay("we_unknown", { since: null })),
    ]) {
      expect(error).toBeInstanceOf(ApiError);
      expect(error).toMatchObject({ status: 404, type: "invalid_request_error", code: "resource_missing" });
      expect((error as ApiError).requestId).toStartWith("req_");
    }
    // A 404 is not retried.
    expect(count("GET", "/webhook_endpoints/we_0000000000000000000000")).toBe(1);
    // An id with characters a path cannot hold is sent encoded, and is just another unknown id.
    expect(await missing(client.webhookEndpoints.get("we_../../senders"))).toMatchObject({ status: 404 });

    const refused = await missing(client.webhookEndpoints.create({ url: "ftp://hooks.example.com/x" }));
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 400, code: "parameter_invalid", param: "url" });
  });
});

describe("runtimes", () => {
  test.skipIf(!Bun.which("node"))("the SDK runs under Node, bundled without Bun APIs", async () => {
    const tenant = await shop();
    const dir = await mkdtemp(join(tmpdir(), "sdk-node-"));
    try {
      await buildForNode(dir);
      const script = `import { MessagingClient } from "./index.js";
const client = new MessagingClient({ baseUrl: process.argv[2], clientId: process.argv[3], clientSecret: process.argv[4] });
const senders = await client.senders.list();
console.log(JSON.stringify({ ids: senders.map((s) => s.id), isBun: typeof Bun !== "undefined" }));`;
      await writeFile(join(dir, "check.mjs"), script);
      const { out, err, code } = await run([
        "node",
        join(dir, "check.mjs"),
        `${env.apiUrl}/v2`,
        tenant.clientId,
        tenant.clientSecret,
      ]);
      expect(err).toBe("");
      expect(code).toBe(0);
      expect(JSON.parse(out)).toEqual({ ids: [tenant.sender.id], isBun: false });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

test("the generated types match the server's schemas", async () => {
  const { out, err, code } = await run(["bun", join(import.meta.dir, "../scripts/generate.ts"), "--check"]);
  expect(`${out}${err}`).toContain("up to date");
  expect(code).toBe(0);
});

describe("examples", () => {
  const examples = join(import.meta.dir, "../examples");
  const credentials = (tenant: Shop) => ({
    MESSAGING_BASE_URL: `${env.apiUrl}/v2`,
    MESSAGING_CLIENT_ID: tenant.clientId,
    MESSAGING_CLIENT_SECRET: tenant.clientSecret,
  });

  test("send-order-notification notifies once per order, however often it runs", async () => {
    const tenant = await shop();
    const to = freshPhone();
    const script = join(examples, "send-order-notification.ts");
    const first = await run(["bun", script, to, "E-1"], credentials(tenant));
    const again = await run(["bun", script, to, "E-1"], credentials(tenant));
    expect([first.err, first.code, again.err, again.code]).toEqual(["", 0, "", 0]);
    expect(first.out).toMatch(new RegExp(`^msg_\\w+ accepted to \\${to}\\n$`));
    expect(again.out).toBe(first.out);
  });

  test("send-campaign invites, schedules reminders, cancels the declined one's, and sends nothing twice when run again", async () => {
    const tenant = await shop();
    const [ana, ben] = [freshPhone(), freshPhone()];
    const script = join(examples, "send-campaign.ts");
    const eventAt = new Date((serverNow() + 3 * 3600) * 1000).toISOString();
    const first = await run(["bun", script, "open-day", eventAt, ana, ben], credentials(tenant));
    expect([first.err, first.code]).toEqual(["", 0]);
    const lines = first.out.trim().split("\n");
    expect(lines).toHaveLength(4);
    expect(lines[0]).toMatch(new RegExp(`^invite \\${ana} 201 msg_\\w+ accepted$`));
    expect(lines[1]).toMatch(new RegExp(`^invite \\${ben} 201 msg_\\w+ accepted$`));
    expect(lines[2]).toMatch(new RegExp(`^reminder \\${ana} 201 msg_\\w+ scheduled$`));
    expect(lines[3]).toMatch(new RegExp(`^reminder \\${ben} 201 msg_\\w+ scheduled$`));
    const reminderOf = (line: string) => line.split(" ")[3]!;

    // Ben declines: the same run again, which replays every message and cancels his reminder.
    const again = await run(
      ["bun", script, "open-day", eventAt, ana, ben, "--decline", ben],
      credentials(tenant),
    );
    expect([again.err, again.code]).toEqual(["", 0]);
    const replayed = again.out.trim().split("\n");
    expect(replayed.slice(0, 4)).toEqual(lines.map((line) => line.replace(" 201 ", " 200 ")));
    expect(replayed[4]).toBe(`canceled ${ben} ${reminderOf(lines[3]!)} canceled`);
    expect(replayed).toHaveLength(5);
    const { client } = sdkFor(tenant);
    expect((await client.messages.get(reminderOf(lines[3]!))).status).toBe("canceled");
    expect(await client.messages.get(reminderOf(lines[2]!))).toMatchObject({
      status: "scheduled",
      client_reference: "open-day:reminder",
      send_at: Math.floor(new Date(eventAt).getTime() / 1000) - 3600,
    });
    expect(await storedOutbound(tenant)).toHaveLength(4);
  });

  test("feed-consumer prints the feed, and persists its cursor", async () => {
    const tenant = await shop();
    const dir = await mkdtemp(join(tmpdir(), "sdk-example-"));
    const cursorFile = join(dir, "cursor.txt");
    const consumer = Bun.spawn(["bun", join(examples, "feed-consumer.ts")], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, ...credentials(tenant), FEED_CURSOR_FILE: cursorFile },
    });
    try {
      await customerWrites(env, tenant.phoneNumberId, {
        from: freshPhone(),
        type: "text",
        text: "Where is my parcel?",
      });
      const reader = consumer.stdout.getReader();
      let printed = "";
      const deadline = Date.now() + 20_000;
      while (!printed.includes("Where is my parcel?") && Date.now() < deadline) {
        const { value, done } = await reader.read();
        if (done) break;
        printed += new TextDecoder().decode(value);
      }
      expect(printed).toMatch(/^msg_\w+ <- \+\d+ \[text\] Where is my parcel\?$/m);
      const cursor = await eventually(
        async () => (await readFile(cursorFile, "utf8").catch(() => "")) || undefined,
      );
      expect(cursor).toStartWith("fd_");
      consumer.kill("SIGINT");
      expect(await consumer.exited).toBe(0);
    } finally {
      consumer.kill("SIGKILL");
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("webhook-receiver catches up from its cursor, then verifies, de-duplicates and logs pushes", async () => {
    const tenant = await shop();
    const { client } = sdkFor(tenant);
    const dir = await mkdtemp(join(tmpdir(), "sdk-receiver-"));
    const cursorFile = join(dir, "events-cursor.txt");
    // An endpoint whose receiver is away: disabled until the receiver is up. Its cursor (the head of
    // the log now) is the receiver's stored cursor.
    const endpoint = await client.webhookEndpoints.create({
      url: "https://hooks.example.com/later",
      events: ["message.received"],
    });
    await client.webhookEndpoints.update(endpoint.id, { status: "disabled" });
    await writeFile(cursorFile, endpoint.delivery.cursor);
    const phone = freshPhone();
    await customerWrites(env, tenant.phoneNumberId, {
      from: phone,
      type: "text",
      text: "While you were away",
    });
    const [away] = await eventually(async () => {
      const page = await call(env.app, "GET", `/v2/events?since=${endpoint.delivery.cursor}`, {
        token: tenant.token,
      });
      return page.body.data.length > 0 ? (page.body.data as MessageEvent[]) : undefined;
    }, 30_000);

    const receiver = Bun.spawn(["bun", join(examples, "webhook-receiver.ts")], {
      stdout: "pipe",
      stderr: "pipe",
      env: {
        ...process.env,
        ...credentials(tenant),
        PORT: "0",
        WEBHOOK_SECRET: endpoint.secret,
        EVENTS_CURSOR_FILE: cursorFile,
      },
    });
    const decoder = new TextDecoder();
    let printed = "";
    let logged = "";
    void (async () => {
      for await (const chunk of receiver.stdout) printed += decoder.decode(chunk);
    })();
    void (async () => {
      for await (const chunk of receiver.stderr) logged += decoder.decode(chunk);
    })();
    try {
      // Caught up: the event from before it started, read from GET /events, and the cursor moved on.
      await eventually(async () => logged.includes("caught up"), 20_000);
      expect(printed).toContain(
        `${away!.id} message.received ${away!.data.id} ${phone} While you were away (catch-up)`,
      );
      const stored = await readFile(cursorFile, "utf8");
      expect(stored).toStartWith("evc_");
      expect(stored).not.toBe(endpoint.delivery.cursor);
      const port = Number(logged.match(/listening on http:\/\/[^:]+:(\d+)\/webhooks/)?.[1]);
      expect(port).toBeGreaterThan(0);
      const url = `http://127.0.0.1:${port}/webhooks`;

      // A forged or unsigned delivery is refused, and nothing of it is logged as an event.
      const body = JSON.stringify({ ...away, id: "evt_forged" });
      const forged = await fetch(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "webhook-id": "evt_forged",
          "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
          "webhook-signature": "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        },
        body,
      });
      expect(forged.status).toBe(400);
      expect((await fetch(url)).status).toBe(405);

      // Enabled at the receiver's URL, the endpoint resumes from its cursor: the event read in the
      // catch-up is pushed too, and dropped as a repeat; a new one is handled once.
      await client.webhookEndpoints.update(endpoint.id, { url, status: "enabled" });
      await eventually(async () => printed.includes(`${away!.id} repeated (push), ignored`), 20_000);
      await customerWrites(env, tenant.phoneNumberId, { from: phone, type: "text", text: "Back again" });
      await eventually(async () => printed.includes("Back again (push)"), 20_000);
      const state = await eventually(async () => {
        const current = await client.webhookEndpoints.get(endpoint.id);
        return current.delivery.pending === 0 && current.delivery.last_success_at !== null && current;
      });
      expect(state.delivery.last_failure).toBeNull();
      expect(printed).not.toContain("evt_forged");
      expect(logged).toContain("refused a delivery");
      const lines = printed.trim().split("\n");
      expect(lines).toHaveLength(3);
      expect(lines[2]).toMatch(/^evt_\w+ message\.received msg_\w+ \+\d+ Back again \(push\)$/);

      receiver.kill("SIGINT");
      expect(await receiver.exited).toBe(0);
    } finally {
      receiver.kill("SIGKILL");
      await client.webhookEndpoints.delete(endpoint.id).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
