import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { normalizeProviderError } from "../../src/channel/provider.ts";
import { SIGNATURE_HEADER, verifySignature } from "../../src/channel/signature.ts";
import type { StatusUpdate, WebhookBody } from "../../src/channel/webhook-payloads.ts";
import { runCli } from "../../src/cli/index.ts";
import {
  createSimulator,
  type SentRecord,
  SIMULATOR_DISPLAY_PHONE_NUMBER,
  SIMULATOR_WABA_ID,
  WEBHOOK_POSTS_IN_FLIGHT,
  webhookRetryDelayMs,
} from "../../src/simulator/app.ts";
import { SANDBOX_RECIPIENTS, SANDBOX_REPLY_TEXT } from "../../src/simulator/sandbox.ts";
import { bsuidForPhone } from "../../src/simulator/users.ts";
import {
  call,
  createTestEnv,
  eventually,
  getToken,
  nextSecond,
  spawnWorker,
  type TestEnv,
  type WorkerProcess,
} from "../support/index.ts";

const APP_SECRET = "simulator-test-secret";
const STATUS_DELAY_MS = 15;
const PHONE_NUMBER_ID = "109876543210001";

interface ReceivedWebhook {
  raw: string;
  signed: boolean;
  userAgent: string | null;
  body: WebhookBody;
}

// The service's side: records every webhook and checks its signature over the raw body.
const received: ReceivedWebhook[] = [];
const answerStatuses: number[] = [];
const receiver = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  async fetch(request) {
    const raw = await request.text();
    received.push({
      raw,
      signed: verifySignature(raw, request.headers.get(SIGNATURE_HEADER), APP_SECRET),
      userAgent: request.headers.get("user-agent"),
      body: JSON.parse(raw),
    });
    return new Response(null, { status: answerStatuses.shift() ?? 200 });
  },
});
const webhookUrl = `http://127.0.0.1:${receiver.port}/webhooks/whatsapp`;

const logLines: string[] = [];
const simulator = createSimulator({
  webhookUrl,
  appSecret: APP_SECRET,
  statusDelayMs: STATUS_DELAY_MS,
  log: (line) => logLines.push(line),
});
simulator.app.listen({ port: 0, hostname: "127.0.0.1" });
const base = `http://127.0.0.1:${simulator.app.server?.port}`;

const shuffling = createSimulator({
  webhookUrl,
  appSecret: APP_SECRET,
  statusDelayMs: 5,
  shuffleStatuses: true,
});
shuffling.app.listen({ port: 0, hostname: "127.0.0.1" });
// Its own statuses never come within a test, so a test can drive them through /_sim/status.
const quiet = createSimulator({ webhookUrl, appSecret: APP_SECRET, statusDelayMs: 60_000 });
quiet.app.listen({ port: 0, hostname: "127.0.0.1" });
const quietUrl = `http://127.0.0.1:${quiet.app.server?.port}`;

afterAll(async () => {
  for (const instance of [simulator, shuffling, quiet]) {
    instance.stop();
    await instance.app.stop(true);
  }
  await receiver.stop(true);
});

beforeEach(async () => {
  await post("/_sim/reset", {});
  received.length = 0;
  answerStatuses.length = 0;
});

function post(path: string, body: unknown, headers: Record<string, string> = {}, to = base) {
  return fetch(`${to}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

const AUTH = { authorization: "Bearer any-token" };

/** The BSUIDs the simulator derives for the test customers' numbers. */
const CUSTOMER_BSUID = bsuidForPhone("14155550123");
const ERIKA_BSUID = bsuidForPhone("4915112345678");

function send(body: unknown, headers: Record<string, string> = AUTH, to = base) {
  return post(`/v21.0/${PHONE_NUMBER_ID}/messages`, body, headers, to);
}

function template(name: string, components?: unknown[], language = "en") {
  return {
    messaging_product: "whatsapp",
    to: "14155550123",
    type: "template",
    template: { name, language: { code: language }, ...(components ? { components } : {}) },
  };
}

const bodyValues = (...values: string[]) => ({
  type: "body",
  parameters: values.map((text) => ({ type: "text", text })),
});

async function sentRecords(query = ""): Promise<SentRecord[]> {
  return ((await (await fetch(`${base}/_sim/sent${query}`)).json()) as { data: SentRecord[] }).data;
}

async function waitFor<T>(check: () => T | undefined, timeoutMs = 3_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error("timed out waiting");
    await Bun.sleep(5);
  }
}

function statusesOf(wamid: string): StatusUpdate[] {
  return received
    .flatMap((webhook) => webhook.body.entry[0]?.changes[0]?.value.statuses ?? [])
    .filter((status) => status.id === wamid);
}

async function graphError(response: Response) {
  return {
    status: response.status,
    error: ((await response.json()) as { error: Record<string, unknown> }).error,
  };
}

describe("sending", () => {
  test("a text send is answered like Graph, recorded whole, and followed by signed sent, delivered, read", async () => {
    const payload = {
      messaging_product: "whatsapp",
      recipient_type: "individual",
      to: "+14155550123",
      type: "text",
      text: { body: "Hello\nthere", preview_url: false },
    };
    const response = await send(payload);

    expect(response.status).toBe(200);
    const answer: unknown = await response.json();
    const wamid = (answer as { messages: { id: string }[] }).messages[0]?.id ?? "";
    expect(answer).toEqual({
      messaging_product: "whatsapp",
      contacts: [{ input: "+14155550123", wa_id: "14155550123" }],
      messages: [{ id: wamid }],
    });
    expect(wamid).toMatch(/^wamid\.[A-Za-z0-9_-]{40}$/);

    const records = await sentRecords();
    expect(records).toEqual([
      { id: wamid, phone_number_id: PHONE_NUMBER_ID, payload, received_at: expect.any(String) },
    ]);
    expect(Date.parse(records[0]?.received_at ?? "")).toBeGreaterThan(Date.now() - 5_000);

    await waitFor(() => (statusesOf(wamid).length === 3 ? true : undefined));
    expect(statusesOf(wamid).map((status) => status.status)).toEqual(["sent", "delivered", "read"]);
    expect(received.every((webhook) => webhook.signed)).toBe(true);
    expect(received[0]?.userAgent).toBe("facebookexternalua");
    expect(received[0]?.body).toEqual({
      object: "whatsapp_business_account",
      entry: [
        {
          id: SIMULATOR_WABA_ID,
          changes: [
            {
              field: "messages",
              value: {
                messaging_product: "whatsapp",
                metadata: {
                  display_phone_number: SIMULATOR_DISPLAY_PHONE_NUMBER,
                  phone_number_id: PHONE_NUMBER_ID,
                },
                statuses: [
                  {
                    id: wamid,
                    status: "sent",
                    timestamp: expect.stringMatching(/^\d{10}$/),
                    recipient_id: "14155550123",
                    recipient_user_id: CUSTOMER_BSUID,
                  },
                ],
              },
            },
          ],
        },
      ],
    });
  });

  test("a template send is accepted and its answer says so", async () => {
    const response = await send(template("order_shipped", [bodyValues("Ana", "A-1001")], "de"));

    expect(response.status).toBe(200);
    const answer = (await response.json()) as { messages: unknown[] };
    expect(answer.messages).toEqual([{ id: expect.stringMatching(/^wamid\./), message_status: "accepted" }]);
  });

  test("every approved catalogue template accepts its own parameters", async () => {
    const upload = new FormData();
    upload.append("messaging_product", "whatsapp");
    upload.append("type", "image/png");
    upload.append(
      "file",
      new Blob([new Uint8Array([0x89, 0x50, 0x4e, 0x47])], { type: "image/png" }),
      "a.png",
    );
    const uploaded = await fetch(`${base}/v21.0/${PHONE_NUMBER_ID}/media`, {
      method: "POST",
      body: upload,
      headers: AUTH,
    });
    const { id: mediaId } = (await uploaded.json()) as { id: string };
    expect(mediaId).toMatch(/^\d{16}$/);

    const sends = [
      template("order_shipped", [bodyValues("Ana", "A-1001")]),
      template("invoice_ready", [
        {
          type: "header",
          parameters: [
            { type: "document", document: { link: "https://example.com/i.pdf", filename: "i.pdf" } },
          ],
        },
        bodyValues("INV-1"),
      ]),
      template("delivery_video", [
        { type: "header", parameters: [{ type: "video", video: { link: "https://example.com/v.mp4" } }] },
        bodyValues("A-1001"),
      ]),
      template("appointment_reminder", [
        { type: "header", parameters: [{ type: "text", text: "Ana" }] },
        bodyValues("May 4", "10:30"),
        { type: "button", sub_type: "url", index: "0", parameters: [{ type: "text", text: "ABC123" }] },
      ]),
      template("welcome"),
    ];
    for (const body of sends) expect((await send(body)).status).toBe(200);
    expect(await sentRecords()).toHaveLength(sends.length);
  });

  test("statuses can arrive shuffled", async () => {
    const shufflingUrl = `http://127.0.0.1:${shuffling.app.server?.port}`;
    const wamids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const response = await send(
        { messaging_product: "whatsapp", to: "14155550123", type: "text", text: { body: `m${i}` } },
        AUTH,
        shufflingUrl,
      );
      wamids.push(((await response.json()) as { messages: { id: string }[] }).messages[0]?.id ?? "");
    }

    await waitFor(() => (wamids.every((wamid) => statusesOf(wamid).length === 3) ? true : undefined));
    for (const wamid of wamids) {
      expect(
        statusesOf(wamid)
          .map((status) => status.status)
          .sort(),
      ).toEqual(["delivered", "read", "sent"]);
    }
  });

  test("a status webhook the service refuses is retried", async () => {
    answerStatuses.push(500);
    const response = await send({
      messaging_product: "whatsapp",
      to: "14155550123",
      text: { body: "retry me" },
    });
    const wamid = ((await response.json()) as { messages: { id: string }[] }).messages[0]?.id ?? "";

    await waitFor(() => (statusesOf(wamid).length === 4 ? true : undefined));
    expect(statusesOf(wamid).map((status) => status.status)).toEqual(["sent", "sent", "delivered", "read"]);
    expect(logLines.some((line) => line.includes(`webhook sent ${wamid} failed (HTTP 500)`))).toBe(true);
  });

  test("retries back off exponentially, capped at a minute", () => {
    expect(Array.from({ length: 12 }, (_, attempt) => webhookRetryDelayMs(attempt))).toEqual([
      200, 400, 800, 1_600, 3_200, 6_400, 12_800, 25_600, 51_200, 60_000, 60_000, 60_000,
    ]);
    expect(webhookRetryDelayMs(10_000)).toBe(60_000);
  });

  test("a service that keeps refusing, then is unreachable, gets every status once it is back", async () => {
    // An api restarting: 503s, then nothing listening, then the receiver again.
    answerStatuses.push(503, 503);
    let target = webhookUrl;
    const patient = createSimulator({
      webhookUrl: () => target,
      appSecret: APP_SECRET,
      statusDelayMs: 5,
      log: (line) => logLines.push(line),
    });
    patient.app.listen({ port: 0, hostname: "127.0.0.1" });
    try {
      const response = await send(
        { messaging_product: "whatsapp", to: "14155550123", text: { body: "outage" } },
        AUTH,
        `http://127.0.0.1:${patient.app.server?.port}`,
      );
      const wamid = ((await response.json()) as { messages: { id: string }[] }).messages[0]?.id ?? "";
      await waitFor(() => (statusesOf(wamid).length === 2 ? true : undefined));
      target = "http://127.0.0.1:9/webhooks/whatsapp";
      await waitFor(() =>
        logLines.some((line) => line.includes(`webhook sent ${wamid} failed (`) && !line.includes("HTTP"))
          ? true
          : undefined,
      );
      target = webhookUrl;
      await waitFor(() => (statusesOf(wamid).length === 5 ? true : undefined), 10_000);
      expect(statusesOf(wamid).map((status) => status.status)).toEqual([
        "sent",
        "sent",
        "sent",
        "delivered",
        "read",
      ]);
      const waits = logLines
        .filter((line) => line.includes(`webhook sent ${wamid} failed`))
        .map((line) => Number(/retrying in (\d+) ms/.exec(line)?.[1]));
      expect(waits.slice(0, 3)).toEqual([200, 400, 800]);
    } finally {
      patient.stop();
      await patient.app.stop(true);
    }
  }, 15_000);

  test("a webhook is dropped only after SIMULATOR_WEBHOOK_RETRY_SECONDS", async () => {
    const brief = createSimulator({
      webhookUrl: "http://127.0.0.1:9/webhooks/whatsapp",
      appSecret: APP_SECRET,
      statusDelayMs: 5,
      webhookRetrySeconds: 1,
      log: (line) => logLines.push(line),
    });
    brief.app.listen({ port: 0, hostname: "127.0.0.1" });
    try {
      const started = performance.now();
      const response = await send(
        { messaging_product: "whatsapp", to: "14155550123", text: { body: "nobody home" } },
        AUTH,
        `http://127.0.0.1:${brief.app.server?.port}`,
      );
      const wamid = ((await response.json()) as { messages: { id: string }[] }).messages[0]?.id ?? "";
      // 0.2 s and 0.4 s waits fit in the second; the next (0.8 s) would not.
      const dropped = await waitFor(() =>
        logLines.find((line) => line.startsWith(`webhook sent ${wamid} dropped`)),
      );
      expect(dropped).toContain("after 3 attempts");
      expect(performance.now() - started).toBeGreaterThan(550);
    } finally {
      brief.stop();
      await brief.app.stop(true);
    }
  });

  test("/_sim/sent filters by phone number id", async () => {
    await send({ messaging_product: "whatsapp", to: "14155550123", text: { body: "one" } });
    await post(
      "/v21.0/200000000000002/messages",
      { messaging_product: "whatsapp", to: "14155550123", text: { body: "two" } },
      AUTH,
    );

    expect((await sentRecords()).map((record) => record.phone_number_id)).toEqual([
      PHONE_NUMBER_ID,
      "200000000000002",
    ]);
    const filtered = await sentRecords("?phone_number_id=200000000000002");
    expect(filtered.map((record) => (record.payload as { text: { body: string } }).text.body)).toEqual([
      "two",
    ]);
  });
});

describe("webhook connections", () => {
  test("statuses are posted over a bounded set of kept-alive connections", async () => {
    // A slow receiver: every post is held 30 ms, so 100 sends' 300 statuses overlap.
    let inFlight = 0;
    let mostInFlight = 0;
    let posts = 0;
    const clientPorts = new Set<number>();
    const slow = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request, server) {
        clientPorts.add(server.requestIP(request)?.port ?? 0);
        inFlight++;
        mostInFlight = Math.max(mostInFlight, inFlight);
        await request.text();
        await Bun.sleep(30);
        inFlight--;
        posts++;
        return new Response(null, { status: 200 });
      },
    });
    const busy = createSimulator({
      webhookUrl: `http://127.0.0.1:${slow.port}/`,
      appSecret: APP_SECRET,
      statusDelayMs: 1,
    });
    busy.app.listen({ port: 0, hostname: "127.0.0.1" });
    try {
      const to = `http://127.0.0.1:${busy.app.server?.port}`;
      await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          send(
            {
              messaging_product: "whatsapp",
              to: `1415555${String(i).padStart(4, "0")}`,
              text: { body: "hi" },
            },
            AUTH,
            to,
          ),
        ),
      );
      await waitFor(() => (posts === 300 ? true : undefined), 10_000);
      // Bun's fetch keeps at most 64 idle connections: more posts at once would each open (and
      // close) one, and the gateway would accept a connection for about every status.
      expect(mostInFlight).toBeLessThanOrEqual(WEBHOOK_POSTS_IN_FLIGHT);
      expect(clientPorts.size).toBeLessThanOrEqual(WEBHOOK_POSTS_IN_FLIGHT);
    } finally {
      busy.stop();
      await busy.app.stop(true);
      await slow.stop(true);
    }
  }, 15_000);
});

describe("Graph errors", () => {
  test("no token: 190 with HTTP 401, in Graph's error shape", async () => {
    const response = await send(
      { messaging_product: "whatsapp", to: "14155550123", text: { body: "hi" } },
      {},
    );

    expect(await graphError(response)).toEqual({
      status: 401,
      error: {
        message: "(#190) Invalid OAuth access token",
        type: "OAuthException",
        code: 190,
        error_data: { messaging_product: "whatsapp", details: expect.stringContaining("Bearer") },
        fbtrace_id: expect.stringMatching(/^[A-Za-z0-9_-]+$/),
      },
    });
  });

  test.each([
    [
      "no recipient",
      { messaging_product: "whatsapp", type: "text", text: { body: "hi" } },
      100,
      "The parameter to or recipient is required.",
    ],
    [
      "no messaging_product",
      { to: "14155550123", text: { body: "hi" } },
      100,
      "The parameter messaging_product is required.",
    ],
    [
      "a text without body",
      { messaging_product: "whatsapp", to: "14155550123", type: "text" },
      100,
      "The parameter text['body'] is required.",
    ],
    [
      "a text body of 4,097 characters",
      { messaging_product: "whatsapp", to: "14155550123", text: { body: "x".repeat(4097) } },
      100,
      "at most 4096 characters",
    ],
    [
      "a recipient that is no number",
      { messaging_product: "whatsapp", to: "call me", text: { body: "hi" } },
      100,
      "not a phone number",
    ],
    ["an unknown template", template("nope"), 132001, "template name (nope) does not exist in en"],
    ["an unknown language", template("welcome", undefined, "fr"), 132001, "does not exist in fr"],
    ["a PENDING template", template("summer_sale", [bodyValues("20%")]), 132001, "summer_sale"],
    ["a REJECTED template", template("old_promo"), 132001, "old_promo"],
    [
      "too few body values",
      template("order_shipped", [bodyValues("Ana")]),
      132000,
      "body: expected 2 parameters, got 1",
    ],
    [
      "too many body values",
      template("welcome", [bodyValues("x")]),
      132000,
      "body: expected 0 parameters, got 1",
    ],
    [
      "a missing text header value",
      template("appointment_reminder", [
        bodyValues("May 4", "10:30"),
        { type: "button", sub_type: "url", index: "0", parameters: [{ type: "text", text: "A" }] },
      ]),
      132000,
      "header: expected 1 parameters, got 0",
    ],
    [
      "a missing button value",
      template("appointment_reminder", [
        { type: "header", parameters: [{ type: "text", text: "Ana" }] },
        bodyValues("May 4", "10:30"),
      ]),
      132000,
      "button 0: expected 1 parameters, got 0",
    ],
    [
      "a button the template lacks",
      template("order_shipped", [
        bodyValues("Ana", "A-1"),
        { type: "button", sub_type: "url", index: "1", parameters: [{ type: "text", text: "A" }] },
      ]),
      132000,
      "button 1",
    ],
    [
      "a missing media header",
      template("invoice_ready", [bodyValues("INV-1")]),
      132000,
      "header: expected 1 parameters, got 0",
    ],
    [
      "an image for a document header",
      template("invoice_ready", [
        { type: "header", parameters: [{ type: "image", image: { link: "https://example.com/a.png" } }] },
        bodyValues("INV-1"),
      ]),
      132012,
      "expected a document parameter, got image",
    ],
    [
      "a media header without id or link",
      template("invoice_ready", [
        { type: "header", parameters: [{ type: "document", document: { filename: "a.pdf" } }] },
        bodyValues("INV-1"),
      ]),
      131008,
      "needs an id or a link",
    ],
    [
      "a media id never uploaded",
      template("invoice_ready", [
        { type: "header", parameters: [{ type: "document", document: { id: "med_123" } }] },
        bodyValues("INV-1"),
      ]),
      131009,
      "med_123 was not uploaded",
    ],
    ["an empty value", template("order_shipped", [bodyValues("Ana", "")]), 131008, "non-empty text"],
    ["a value with a line break", template("order_shipped", [bodyValues("Ana", "A\n1")]), 132018, "new-line"],
    [
      "a message type it does not simulate",
      { messaging_product: "whatsapp", to: "14155550123", type: "sticker", sticker: { id: "1" } },
      100,
      "text and template",
    ],
  ])("%s -> %d", async (_, body, code, details) => {
    const response = await send(body);

    const { status, error } = await graphError(response);
    expect(status).toBe(400);
    expect(error.code).toBe(code);
    expect(error.message).toStartWith(`(#${code}) `);
    expect((error.error_data as { details: string }).details).toContain(details);
    expect(await sentRecords()).toEqual([]);
  });

  test.each([
    [130429, 429],
    [80007, 429],
    [4, 429],
    [1, 500],
    [131000, 500],
    [2, 503],
    [131026, 400],
    [424242, 400],
  ])("fail-next %d answers HTTP %d, records nothing and posts no statuses", async (code, status) => {
    const queued = await post("/_sim/fail-next", { count: 2, code });
    expect(await queued.json()).toEqual({ pending_failures: 2 });
    const text = { messaging_product: "whatsapp", to: "14155550123", text: { body: "hi" } };

    for (let i = 0; i < 2; i++) {
      const { status: httpStatus, error } = await graphError(await send(text));
      expect([httpStatus, error.code, error.type]).toEqual([status, code, "OAuthException"]);
    }
    expect((await send(text)).status).toBe(200);
    const [record] = await sentRecords();
    await waitFor(() => (received.length === 3 ? true : undefined));
    expect(
      received.flatMap((webhook) => webhook.body.entry[0]?.changes[0]?.value.statuses?.map((s) => s.id)),
    ).toEqual([record?.id, record?.id, record?.id]);
  });

  test("reset drops pending failures and the send log", async () => {
    await post("/_sim/fail-next", { count: 5, code: 131000 });
    await send({ messaging_product: "whatsapp", to: "14155550123", text: { body: "hi" } });
    await post("/_sim/reset", {});

    expect(
      (await send({ messaging_product: "whatsapp", to: "14155550123", text: { body: "hi" } })).status,
    ).toBe(200);
    expect(await sentRecords()).toHaveLength(1);
  });

  test("an unknown path answers in Graph's shape, a control typo in plain JSON", async () => {
    const graph = await fetch(`${base}/v21.0/${PHONE_NUMBER_ID}/nothing`, { headers: AUTH });
    expect(graph.status).toBe(404);
    expect(((await graph.json()) as { error: { type: string } }).error.type).toBe("OAuthException");

    const control = await post("/_sim/fail-nxt", { count: 1, code: 1 });
    expect(control.status).toBe(404);
    expect(await control.json()).toEqual({
      error: { message: "Unknown control route: POST /_sim/fail-nxt" },
    });
  });
});

describe("media and templates", () => {
  function upload(type: string, bytes = new Uint8Array([1, 2, 3]), fields: Record<string, string> = {}) {
    const form = new FormData();
    form.append("messaging_product", "whatsapp");
    form.append("type", type);
    form.append("file", new Blob([bytes], { type }), "upload.bin");
    for (const [name, value] of Object.entries(fields)) form.set(name, value);
    return fetch(`${base}/v21.0/${PHONE_NUMBER_ID}/media`, { method: "POST", body: form, headers: AUTH });
  }

  test("an upload answers a numeric id usable as a header, only by the phone number it was uploaded for", async () => {
    const { id } = (await (await upload("application/pdf")).json()) as { id: string };
    expect(id).toMatch(/^\d{16}$/);

    const invoice = template("invoice_ready", [
      { type: "header", parameters: [{ type: "document", document: { id, filename: "INV-1.pdf" } }] },
      bodyValues("INV-1"),
    ]);
    expect((await send(invoice)).status).toBe(200);
    const other = await post("/v21.0/200000000000002/messages", invoice, AUTH);
    expect((await graphError(other)).error.code).toBe(131009);
  });

  test("an upload of an unsupported type, or without file, is refused", async () => {
    const unsupported = await graphError(await upload("application/x-msdownload"));
    expect([unsupported.status, unsupported.error.code]).toEqual([400, 100]);

    const form = new FormData();
    form.append("messaging_product", "whatsapp");
    form.append("type", "application/pdf");
    const missing = await graphError(
      await fetch(`${base}/v21.0/${PHONE_NUMBER_ID}/media`, { method: "POST", body: form, headers: AUTH }),
    );
    expect([missing.status, missing.error.code]).toEqual([400, 100]);
  });

  test("an image over 5 MB is refused", async () => {
    const { status, error } = await graphError(
      await upload("image/jpeg", new Uint8Array(5 * 1024 * 1024 + 1)),
    );
    expect([status, error.code]).toEqual([400, 131053]);
  });

  test("templates page with limit and after, and say when more follow", async () => {
    const url = `${base}/v21.0/${SIMULATOR_WABA_ID}/message_templates?fields=name,status&limit=5`;
    const first = (await (await fetch(url, { headers: AUTH })).json()) as {
      data: { name: string }[];
      paging: { cursors: { before: string; after: string }; next?: string };
    };
    expect(first.data.map((entry) => entry.name)).toEqual([
      "order_shipped",
      "order_shipped",
      "invoice_ready",
      "delivery_video",
      "appointment_reminder",
    ]);
    expect(first.paging.next).toContain(`after=${first.paging.cursors.after}`);

    const second = (await (await fetch(first.paging.next ?? "", { headers: AUTH })).json()) as typeof first;
    expect(second.data.map((entry) => entry.name)).toEqual([
      "welcome",
      "summer_sale",
      "old_promo",
      "login_code",
    ]);
    expect(second.paging.next).toBeUndefined();
    expect(second.paging.cursors.before).toEqual(expect.any(String));

    const everything = (await (
      await fetch(`${base}/v19.0/any-waba/message_templates`, { headers: AUTH })
    ).json()) as typeof first;
    expect(everything.data).toHaveLength(9);
  });

  test("a bad cursor or limit is an invalid parameter", async () => {
    for (const query of ["after=garbage!", "limit=0", "limit=many"]) {
      const response = await fetch(`${base}/v21.0/1/message_templates?${query}`, { headers: AUTH });
      const { status, error } = await graphError(response);
      expect([status, error.code]).toEqual([400, 100]);
    }
    const anonymous = await fetch(`${base}/v21.0/1/message_templates`);
    expect(anonymous.status).toBe(401);
  });
});

describe("control API", () => {
  function lastMessageWebhook() {
    const webhook = received.at(-1);
    return { webhook, value: webhook?.body.entry[0]?.changes[0]?.value };
  }
  /** The customer 14155550123 writes to the simulator's number: `/_sim/inbound` with these fields. */
  const customerInbound = (fields: Record<string, unknown>) =>
    post("/_sim/inbound", { phone_number_id: PHONE_NUMBER_ID, from: "14155550123", ...fields });

  test("inbound text: 10,000 characters with line breaks arrive byte for byte, signed", async () => {
    const line = "Ünïcödé ✓ – line of text\r\n";
    const text = `${"x".repeat(9_000)}\n\n${line.repeat(Math.ceil(998 / line.length))}`.slice(0, 10_000);
    const response = await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      from: "+4915112345678",
      type: "text",
      text,
      timestamp: 1_700_000_000,
      name: "Erika Mustermann",
    });

    expect(response.status).toBe(200);
    const answer = (await response.json()) as { id: string; webhook_status: number };
    expect(answer).toEqual({ id: expect.stringMatching(/^wamid\./), webhook_status: 200 });
    const { webhook, value } = lastMessageWebhook();
    expect(webhook?.signed).toBe(true);
    expect(value).toEqual({
      messaging_product: "whatsapp",
      metadata: { display_phone_number: SIMULATOR_DISPLAY_PHONE_NUMBER, phone_number_id: PHONE_NUMBER_ID },
      contacts: [{ profile: { name: "Erika Mustermann" }, wa_id: "4915112345678", user_id: ERIKA_BSUID }],
      messages: [
        {
          from: "4915112345678",
          from_user_id: ERIKA_BSUID,
          id: answer.id,
          timestamp: "1700000000",
          type: "text",
          text: { body: text },
        },
      ],
    });
    const message = value?.messages?.[0];
    expect(message?.type === "text" && message.text.body.length).toBe(10_000);
    expect(webhook?.raw).toContain(JSON.stringify(text));
  });

  test("inbound image with caption, default name, id and timestamp", async () => {
    const before = Math.floor(Date.now() / 1000);
    const response = await customerInbound({ type: "image", caption: "the damage" });

    const { id } = (await response.json()) as { id: string };
    const { value } = lastMessageWebhook();
    expect(value?.contacts).toEqual([
      { profile: { name: "Sim Customer" }, wa_id: "14155550123", user_id: CUSTOMER_BSUID },
    ]);
    expect(value?.messages).toEqual([
      {
        from: "14155550123",
        from_user_id: CUSTOMER_BSUID,
        id,
        timestamp: expect.stringMatching(/^\d+$/),
        type: "image",
        image: {
          id: expect.stringMatching(/^\d+$/),
          mime_type: "image/png",
          sha256: expect.stringMatching(/^[A-Za-z0-9+/]{43}=$/),
          caption: "the damage",
        },
      },
    ]);
    expect(Number(value?.messages?.[0]?.timestamp)).toBeGreaterThanOrEqual(before);
  });

  test("inbound document with filename, under the given wamid", async () => {
    await customerInbound({ type: "document", filename: "receipt.pdf", id: "wamid.custom-1" });

    expect(lastMessageWebhook().value?.messages).toEqual([
      {
        from: "14155550123",
        from_user_id: CUSTOMER_BSUID,
        id: "wamid.custom-1",
        timestamp: expect.any(String),
        type: "document",
        document: {
          id: expect.any(String),
          mime_type: "application/pdf",
          sha256: expect.any(String),
          filename: "receipt.pdf",
        },
      },
    ]);
  });

  test("inbound audio and video carry media", async () => {
    await customerInbound({ type: "audio" });
    expect(lastMessageWebhook().value?.messages?.[0]).toMatchObject({
      type: "audio",
      audio: { mime_type: "audio/ogg; codecs=opus", voice: true },
    });

    await customerInbound({ type: "video" });
    expect(lastMessageWebhook().value?.messages?.[0]).toMatchObject({
      type: "video",
      video: { mime_type: "video/mp4" },
    });
  });

  test("inbound system message, without contact profile", async () => {
    await customerInbound({
      type: "system",
      text: "Ana changed from +1 415-555-0123 to +1 415-555-0199",
      new_wa_id: "14155550199",
      waba_id: "200000000000001",
    });

    const { webhook, value } = lastMessageWebhook();
    expect(webhook?.body.entry[0]?.id).toBe("200000000000001");
    expect(value?.contacts).toBeUndefined();
    expect(value?.messages).toEqual([
      {
        from: "14155550123",
        from_user_id: CUSTOMER_BSUID,
        id: expect.any(String),
        timestamp: expect.any(String),
        type: "system",
        system: {
          body: "Ana changed from +1 415-555-0123 to +1 415-555-0199",
          type: "customer_changed_number",
          new_wa_id: "14155550199",
        },
      },
    ]);
  });

  test("inbound reports what the service answered, and when it could not be reached", async () => {
    answerStatuses.push(401);
    const refused = await customerInbound({ type: "text", text: "hi" });
    expect(refused.status).toBe(200);
    expect(await refused.json()).toMatchObject({ webhook_status: 401 });

    const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
    const unreachable = createSimulator({
      webhookUrl: `http://127.0.0.1:${closed.port}/`,
      appSecret: APP_SECRET,
      statusDelayMs: 5,
    });
    await closed.stop(true);
    const answer = (await unreachable.app
      .handle(
        new Request("http://localhost/_sim/inbound", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            phone_number_id: PHONE_NUMBER_ID,
            from: "14155550123",
            type: "text",
            text: "hi",
          }),
        }),
      )
      .then((response) => response.json())) as { webhook_status: null; webhook_error: string };
    expect(answer.webhook_status).toBeNull();
    expect(answer.webhook_error).toEqual(expect.any(String));
  });

  test.each([
    [{ phone_number_id: PHONE_NUMBER_ID, from: "14155550123", type: "text" }, "type text needs text"],
    [
      { phone_number_id: PHONE_NUMBER_ID, from: "14155550123", type: "image", filename: "a.jpg" },
      "filename does not apply to type image",
    ],
    [{ phone_number_id: PHONE_NUMBER_ID, from: "14155550123", type: "sticker" }, "type"],
    [{ phone_number_id: PHONE_NUMBER_ID, from: "not a number", type: "text", text: "hi" }, "from"],
    [{ from: "14155550123", type: "text", text: "hi" }, "The parameter phone_number_id is required."],
    [
      { phone_number_id: PHONE_NUMBER_ID, from: "14155550123", type: "text", text: "hi", colour: "red" },
      "colour",
    ],
  ])("inbound refuses %o", async (body, message) => {
    const response = await post("/_sim/inbound", body);

    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toContain(message);
    expect(received).toEqual([]);
  });

  test("/_sim/status drives failed-then-delivered, with Graph error details", async () => {
    const response = await send(
      { messaging_product: "whatsapp", to: "14155550123", text: { body: "hi" } },
      AUTH,
      quietUrl,
    );
    const wamid = ((await response.json()) as { messages: { id: string }[] }).messages[0]?.id ?? "";

    const failed = await post(
      "/_sim/status",
      { wamid, status: "failed", errors: [{ code: 131047 }], timestamp: 1_700_000_100 },
      {},
      quietUrl,
    );
    expect(await failed.json()).toEqual({ webhook_status: 200 });
    const delivered = await post("/_sim/status", { wamid, status: "delivered" }, {}, quietUrl);
    expect(await delivered.json()).toEqual({ webhook_status: 200 });

    expect(statusesOf(wamid)).toEqual([
      {
        id: wamid,
        status: "failed",
        timestamp: "1700000100",
        recipient_id: "14155550123",
        recipient_user_id: CUSTOMER_BSUID,
        errors: [
          {
            code: 131047,
            title: "Re-engagement message",
            message: "Re-engagement message",
            error_data: { details: expect.stringContaining("24 hours") },
          },
        ],
      },
      {
        id: wamid,
        status: "delivered",
        timestamp: expect.any(String),
        recipient_id: "14155550123",
        recipient_user_id: CUSTOMER_BSUID,
      },
    ]);
    expect(received.every((webhook) => webhook.signed)).toBe(true);
  });

  test("/_sim/status for a wamid it never sent needs the phone number and recipient", async () => {
    const unknown = await post("/_sim/status", { wamid: "wamid.elsewhere", status: "read" });
    expect(unknown.status).toBe(400);

    const given = await post("/_sim/status", {
      wamid: "wamid.elsewhere",
      status: "failed",
      phone_number_id: "1",
      recipient_id: "14155550123",
    });
    expect(await given.json()).toEqual({ webhook_status: 200 });
    expect(statusesOf("wamid.elsewhere")[0]?.errors?.[0]?.code).toBe(131026);

    const misplaced = await post("/_sim/status", {
      wamid: "wamid.elsewhere",
      status: "read",
      phone_number_id: "1",
      recipient_id: "1",
      errors: [{ code: 1 }],
    });
    expect(misplaced.status).toBe(400);
  });

  test("health", async () => {
    expect(await (await fetch(`${base}/_sim/health`)).json()).toEqual({ status: "ok" });
  });
});

describe("users without a phone (DESIGN §14)", () => {
  const lastValue = () => received.at(-1)?.body.entry[0]?.changes[0]?.value;
  const text = (address: Record<string, string>) => ({
    messaging_product: "whatsapp",
    ...address,
    type: "text",
    text: { body: "Hello" },
  });
  const wamidOf = async (response: Response) =>
    ((await response.json()) as { messages: { id: string }[] }).messages[0]?.id ?? "";

  test("the BSUID derived from a phone: its country, a dot, 16 digits, the same every run", () => {
    expect(CUSTOMER_BSUID).toMatch(/^US\.\d{16}$/);
    expect(ERIKA_BSUID).toMatch(/^DE\.\d{16}$/);
    expect(bsuidForPhone("14155550123")).toBe(CUSTOMER_BSUID);
    expect(bsuidForPhone("14155550124")).not.toBe(CUSTOMER_BSUID);
  });

  test("hide_phone: the webhook has no from and no wa_id, only the BSUID and the username; remembered", async () => {
    const first = await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      from: "+4915112345678",
      hide_phone: true,
      username: "erika.m",
      type: "text",
      text: "hi",
      name: "Erika",
    });
    expect(first.status).toBe(200);
    const { id } = (await first.json()) as { id: string };
    expect(lastValue()?.contacts).toEqual([
      { profile: { name: "Erika", username: "erika.m" }, user_id: ERIKA_BSUID },
    ]);
    expect(lastValue()?.messages).toEqual([
      { from_user_id: ERIKA_BSUID, id, timestamp: expect.any(String), type: "text", text: { body: "hi" } },
    ]);
    expect(received.at(-1)?.raw).not.toContain("4915112345678");

    // The next message of the same user still withholds the phone.
    await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      from: "4915112345678",
      type: "text",
      text: "again",
    });
    expect(lastValue()?.messages?.[0]).not.toHaveProperty("from");
    expect(lastValue()?.contacts?.[0]).toEqual({
      profile: { name: "Sim Customer", username: "erika.m" },
      user_id: ERIKA_BSUID,
    });

    // Known by BSUID alone, and by a given BSUID.
    await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      user_id: ERIKA_BSUID,
      type: "text",
      text: "3",
    });
    expect(lastValue()?.messages?.[0]).toMatchObject({ from_user_id: ERIKA_BSUID });
    await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      user_id: "BR.77",
      hide_phone: true,
      type: "text",
      text: "4",
    });
    expect(lastValue()?.contacts).toEqual([{ profile: { name: "Sim Customer" }, user_id: "BR.77" }]);
  });

  test("inbound needs from or user_id, a well-formed BSUID, and the two naming one user", async () => {
    const refused = async (fields: Record<string, unknown>) => {
      const response = await post("/_sim/inbound", {
        phone_number_id: PHONE_NUMBER_ID,
        type: "text",
        text: "x",
        ...fields,
      });
      return {
        status: response.status,
        error: ((await response.json()) as { error: { message: string } }).error.message,
      };
    };
    expect(await refused({})).toEqual({ status: 400, error: "give from, user_id or both" });
    expect((await refused({ user_id: "de.1" })).error).toContain("user_id");
    await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      from: "14155550123",
      type: "text",
      text: "x",
    });
    expect((await refused({ from: "14155550123", user_id: "US.1" })).error).toContain(CUSTOMER_BSUID);
    expect(received).toHaveLength(1);
  });

  test("a send by recipient is accepted; its statuses carry recipient_user_id, recipient_id only when shared", async () => {
    await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      from: "4915112345678",
      hide_phone: true,
      type: "text",
      text: "hi",
    });
    received.length = 0;
    const response = await send(text({ recipient: ERIKA_BSUID }));
    expect(response.status).toBe(200);
    const answer = (await response.clone().json()) as { contacts: unknown[] };
    expect(answer.contacts).toEqual([{ input: ERIKA_BSUID, user_id: ERIKA_BSUID }]);
    const hidden = await wamidOf(response);
    expect((await sentRecords()).map((record) => [record.id, record.recipient])).toEqual([
      [hidden, ERIKA_BSUID],
    ]);
    await waitFor(() => (statusesOf(hidden).length === 3 ? true : undefined));
    expect(
      statusesOf(hidden).map(({ recipient_id, recipient_user_id }) => ({ recipient_id, recipient_user_id })),
    ).toEqual(Array(3).fill({ recipient_id: undefined, recipient_user_id: ERIKA_BSUID }));

    // A user who shares the phone, reached by BSUID: the phone is in the statuses.
    const shared = await wamidOf(await send(text({ recipient: CUSTOMER_BSUID })));
    await waitFor(() => (statusesOf(shared).length === 3 ? true : undefined));
    expect(statusesOf(shared)[0]).toMatchObject({ recipient_user_id: CUSTOMER_BSUID });
    // Not known yet: the simulator met this BSUID only now, so it knows no phone.
    expect(statusesOf(shared)[0]?.recipient_id).toBeUndefined();
    const byPhone = await wamidOf(await send(text({ to: "14155550123" })));
    const again = await wamidOf(await send(text({ recipient: CUSTOMER_BSUID })));
    await waitFor(() => (statusesOf(again).length === 3 ? true : undefined));
    expect(statusesOf(byPhone)[0]).toMatchObject({
      recipient_id: "14155550123",
      recipient_user_id: CUSTOMER_BSUID,
    });
    expect(statusesOf(again)[0]).toMatchObject({
      recipient_id: "14155550123",
      recipient_user_id: CUSTOMER_BSUID,
    });
  });

  test("a malformed recipient, to and recipient together, or an authentication template by BSUID: Graph errors", async () => {
    expect(await graphError(await send(text({ recipient: "de.123" })))).toMatchObject({
      status: 400,
      error: { code: 100, error_data: { details: expect.stringContaining("not a business-scoped user ID") } },
    });
    expect(await graphError(await send(text({ to: "14155550123", recipient: ERIKA_BSUID })))).toMatchObject({
      status: 400,
      error: { code: 100, error_data: { details: expect.stringContaining("not both") } },
    });
    const loginCode = (address: Record<string, string>) => ({
      ...template("login_code", [bodyValues("123456")]),
      to: undefined,
      ...address,
    });
    expect(await graphError(await send(loginCode({ recipient: ERIKA_BSUID })))).toMatchObject({
      status: 400,
      error: { code: 100, error_data: { details: expect.stringContaining("authentication template") } },
    });
    expect((await send(loginCode({ to: "14155550123" }))).status).toBe(200);
    expect((await sentRecords()).map((record) => record.recipient)).toEqual([undefined]);
  });

  test("login_code is in the catalogue: en, authentication, approved, one value", async () => {
    const { data } = (await (
      await fetch(`${base}/v21.0/${SIMULATOR_WABA_ID}/message_templates?limit=100`, { headers: AUTH })
    ).json()) as { data: { name: string }[] };
    expect(data.find((entry) => entry.name === "login_code") as unknown).toEqual({
      id: expect.any(String),
      name: "login_code",
      language: "en",
      status: "APPROVED",
      category: "AUTHENTICATION",
      components: [
        { type: "BODY", text: "{{1}} is your verification code.", example: { body_text: [["123456"]] } },
      ],
    });
  });

  test("/_sim/users/change_number posts user_changed_number; the new phone names the same user", async () => {
    await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      from: "14155550123",
      type: "text",
      text: "hi",
    });
    const response = await post("/_sim/users/change_number", {
      phone_number_id: PHONE_NUMBER_ID,
      user_id: CUSTOMER_BSUID,
      new_phone: "+14155550199",
      name: "Ana",
    });
    expect(response.status).toBe(200);
    const { id } = (await response.json()) as { id: string };
    expect(received.at(-1)?.signed).toBe(true);
    expect(lastValue()?.contacts).toBeUndefined();
    expect(lastValue()?.messages).toEqual([
      {
        from: "14155550123",
        from_user_id: CUSTOMER_BSUID,
        id,
        timestamp: expect.any(String),
        type: "system",
        system: {
          body: "User Ana changed from 14155550123 to 14155550199",
          wa_id: "14155550199",
          type: "user_changed_number",
          user_id: CUSTOMER_BSUID,
        },
      },
    ]);
    const wamid = await wamidOf(await send(text({ to: "14155550199" })));
    await waitFor(() => (statusesOf(wamid).length > 0 ? true : undefined));
    expect(statusesOf(wamid)[0]).toMatchObject({
      recipient_id: "14155550199",
      recipient_user_id: CUSTOMER_BSUID,
    });
    // The old number is someone else's now: another person, with a BSUID of their own.
    await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      from: "14155550123",
      type: "text",
      text: "new",
    });
    // Found by its text: statuses of the send above may still come after it.
    const fromOldNumber = received
      .flatMap((webhook) => webhook.body.entry[0]?.changes[0]?.value.messages ?? [])
      .find((message) => message.type === "text" && message.text.body === "new");
    expect(fromOldNumber?.from).toBe("14155550123");
    expect(fromOldNumber?.from_user_id).toMatch(/^US\.[0-9]{16}$/);
    expect(fromOldNumber?.from_user_id).not.toBe(CUSTOMER_BSUID);
  });

  test("/_sim/users/change_user_id posts user_changed_user_id, without a phone; the new BSUID names the user", async () => {
    await post("/_sim/inbound", {
      phone_number_id: PHONE_NUMBER_ID,
      from: "14155550123",
      type: "text",
      text: "hi",
    });
    const response = await post("/_sim/users/change_user_id", {
      phone_number_id: PHONE_NUMBER_ID,
      user_id: CUSTOMER_BSUID,
      new_user_id: "US.42",
    });
    expect(response.status).toBe(200);
    const { id } = (await response.json()) as { id: string };
    expect(lastValue()?.messages).toEqual([
      {
        from_user_id: CUSTOMER_BSUID,
        id,
        timestamp: expect.any(String),
        type: "system",
        system: {
          body: "User A user changed their business-scoped user ID",
          type: "user_changed_user_id",
          user_id: "US.42",
          previous_user_id: CUSTOMER_BSUID,
        },
      },
    ]);
    const wamid = await wamidOf(await send(text({ recipient: "US.42" })));
    await waitFor(() => (statusesOf(wamid).length > 0 ? true : undefined));
    expect(statusesOf(wamid)[0]).toMatchObject({ recipient_id: "14155550123", recipient_user_id: "US.42" });

    const bad = await post("/_sim/users/change_user_id", {
      phone_number_id: PHONE_NUMBER_ID,
      user_id: "US.42",
      new_user_id: "nope",
    });
    expect(bad.status).toBe(400);
  });
});

describe("sandbox recipients", () => {
  const text = (to: string) => ({ messaging_product: "whatsapp", to, type: "text", text: { body: "Hello" } });
  const failing = Object.entries(SANDBOX_RECIPIENTS).flatMap(([waId, behaviour]) =>
    behaviour.kind === "fail" ? [[waId, behaviour.graphCode, behaviour.gatewayCode] as const] : [],
  );

  test("there is a failing number for every failure the gateway normalizes to", () => {
    expect(new Set(failing.map(([, , gatewayCode]) => gatewayCode))).toEqual(
      new Set([
        "provider_rate_limited",
        "provider_unavailable",
        "recipient_invalid",
        "template_mismatch",
        "template_not_found",
        "reengagement_required",
        "recipient_opted_out",
        "parameter_invalid",
        "provider_auth_failed",
        "provider_error",
      ]),
    );
  });

  test.each(failing)(
    "+%s fails every send with Graph error %d, which the gateway calls %s",
    async (waId, graphCode, gatewayCode) => {
      const { status, error } = await graphError(await send(text(`+${waId}`)));
      expect(error.code).toBe(graphCode);
      expect(normalizeProviderError(graphCode, String(error.message), status).code).toBe(gatewayCode);
      expect(await sentRecords()).toEqual([]);
      await Bun.sleep(STATUS_DELAY_MS * 4);
      expect(received).toEqual([]);
    },
  );

  test("+15550001100 stays at sent", async () => {
    const { messages } = (await (await send(text("+15550001100"))).json()) as { messages: { id: string }[] };
    const wamid = messages[0]?.id ?? "";
    await waitFor(() => (statusesOf(wamid).length > 0 ? true : undefined));
    await Bun.sleep(STATUS_DELAY_MS * 6);
    expect(statusesOf(wamid).map((status) => status.status)).toEqual(["sent"]);
  });

  test("+15550001101 is read within a second, even when statuses are slow", async () => {
    // `quiet` posts its statuses after a minute; this number does not wait.
    const started = performance.now();
    const answer = await send(text("15550001101"), AUTH, quietUrl);
    const { messages } = (await answer.json()) as { messages: { id: string }[] };
    const wamid = messages[0]?.id ?? "";
    await waitFor(() => (statusesOf(wamid).some((s) => s.status === "read") ? true : undefined), 1_000);
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(statusesOf(wamid).map((status) => status.status)).toEqual(["sent", "delivered", "read"]);
  });

  test("+15550001102 answers after its statuses, so the 24-hour window opens", async () => {
    await send({ ...template("welcome"), to: "15550001102" });
    const reply = await waitFor(() =>
      received
        .flatMap((webhook) => webhook.body.entry[0]?.changes[0]?.value.messages ?? [])
        .find((message) => message.from === "15550001102"),
    );
    expect(reply).toMatchObject({ type: "text", text: { body: SANDBOX_REPLY_TEXT } });
    const statuses = received.filter((webhook) => webhook.body.entry[0]?.changes[0]?.value.statuses);
    expect(statuses).toHaveLength(3);
    expect(received.at(-1)?.signed).toBe(true);
    expect(received.at(-1)?.body.entry[0]?.changes[0]?.value.metadata.phone_number_id).toBe(PHONE_NUMBER_ID);
  });
});

describe("against the gateway", () => {
  let env: TestEnv;
  let token: string;
  const workers: WorkerProcess[] = [];

  beforeAll(async () => {
    env = await createTestEnv({ simulator: true, statusDelayMs: 50 });
    const seeded = await runCli(["seed"], {
      ...process.env,
      NODE_ENV: "development",
      DATABASE_URL: env.config.databaseUrl,
      WHATSAPP_GRAPH_URL: env.simulatorUrl,
      LOG_LEVEL: "silent",
    });
    const { application } = JSON.parse(seeded.out);
    token = await getToken(env.app, application.client_id, application.client_secret);
    workers.push(spawnWorker(env, "send"), spawnWorker(env, "finalize"), spawnWorker(env, "status"));
  });

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop()));
    await env.close();
  });

  const inbound = (phoneNumberId: string) =>
    post(
      "/_sim/inbound",
      { phone_number_id: phoneNumberId, from: "+14155550123", type: "text", text: "hi" },
      {},
      env.simulatorUrl,
    );

  test("a control call for a phone_number_id the gateway does not know is a 404 that says so", async () => {
    const unknown = await inbound("109876543210001");
    expect(unknown.status).toBe(404);
    const { error } = (await unknown.json()) as { error: { message: string } };
    expect(error.message).toContain("phone_number_id 109876543210001 is not a sender of the service");
    // The seed's number is known.
    const known = await inbound("100000000000001");
    expect(known.status).toBe(200);
    expect(await known.json()).toMatchObject({ webhook_status: 200 });
  });

  async function sendTemplate(to: string) {
    const sent = await call(env.app, "POST", "/v2/messages", {
      token,
      body: { to, template: { name: "welcome", language: "en" } },
    });
    expect(sent.status).toBe(201);
    return sent.body as { id: string; to: { id: string } };
  }

  /** A read of the seed's application, whose limit is 5 per second: a 429 is "not yet". */
  async function read(path: string) {
    const result = await call(env.app, "GET", path, { token });
    return result.status === 200 ? result.body : undefined;
  }

  async function statusOf(message: { id: string; to: { id: string } }) {
    const history = await read(`/v2/contacts/${message.to.id}/messages`);
    return (history?.data as { id: string; status: string | null }[] | undefined)?.find(
      (m) => m.id === message.id,
    )?.status;
  }

  test("+15550001102 answers a template, and its window opens", async () => {
    const message = await sendTemplate("+15550001102");
    const contact = await eventually(async () => {
      const found = await read(`/v2/contacts/${message.to.id}`);
      return found?.messaging.sendable === true && found;
    }, 20_000);
    expect(contact.messaging.within_window).toBe(true);
    await nextSecond();
    const history = await read(`/v2/contacts/${message.to.id}/messages`);
    expect(history.data.at(-1)).toMatchObject({ direction: "inbound", text: SANDBOX_REPLY_TEXT });
  });

  test("+15550001001 fails the send for good; +15550001100 stays at sent", async () => {
    const failing = await sendTemplate("+15550001001");
    const staying = await sendTemplate("+15550001100");
    expect(await eventually(async () => (await statusOf(failing)) === "failed", 20_000)).toBe(true);
    expect(await eventually(async () => (await statusOf(staying)) === "sent", 20_000)).toBe(true);
    await Bun.sleep(500);
    await nextSecond();
    expect(await statusOf(staying)).toBe("sent");
  });
});

describe("memory stays flat", () => {
  test("only the last keepSends sends are remembered; /_sim/sent says how many were forgotten", async () => {
    const small = createSimulator({
      webhookUrl,
      appSecret: APP_SECRET,
      statusDelayMs: 60_000,
      keepSends: 100,
    });
    small.app.listen({ port: 0, hostname: "127.0.0.1" });
    const url = `http://127.0.0.1:${small.app.server?.port}`;
    try {
      for (let i = 0; i < 250; i++) {
        const answer = await send(
          { messaging_product: "whatsapp", to: "14155550123", type: "text", text: { body: `m${i}` } },
          AUTH,
          url,
        );
        expect(answer.status).toBe(200);
      }
      const { data, forgotten } = (await (await fetch(`${url}/_sim/sent`)).json()) as {
        data: { payload: { text: { body: string } } }[];
        forgotten: number;
      };
      expect(data.length).toBeGreaterThanOrEqual(100);
      expect(data.length).toBeLessThanOrEqual(110);
      expect(data.length + forgotten).toBe(250);
      // The newest are the ones kept.
      expect(data.at(-1)?.payload.text.body).toBe("m249");
      // A follower reads from its position: the sends after the 240th, each once.
      const after = (await (await fetch(`${url}/_sim/sent?from=240`)).json()) as {
        data: { payload: { text: { body: string } } }[];
        total: number;
      };
      expect(after.total).toBe(250);
      expect(after.data.map((r) => r.payload.text.body)).toEqual(
        Array.from({ length: 10 }, (_, i) => `m${240 + i}`),
      );
    } finally {
      small.stop();
      await small.app.stop(true);
    }
  });
});
