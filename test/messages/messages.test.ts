import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApplication } from "../../src/applications/service.ts";
import { deleteExpired } from "../../src/db/batched-delete.ts";
import { finalizeInbound } from "../../src/inbound/finalize.ts";
import { uploadMedia } from "../../src/media/service.ts";
import { IDEMPOTENCY_EXPIRY } from "../../src/messages/idempotency.ts";
import { type SenderRow, setSenderActive } from "../../src/senders/repository.ts";
import {
  addSender,
  createShop,
  customerWrites,
  failNextSends,
  freshPhone,
  messageRow,
  ORDER_SHIPPED,
  outboundMessages,
  postMessage,
  type Shop,
  sentTo,
} from "../support/fixtures.ts";
import {
  call,
  createTestEnv,
  deleteRedisPrefix,
  eventually,
  expectApiError,
  getToken,
  spawnWorker,
  type TestEnv,
} from "../support/index.ts";

let env: TestEnv;
let shop: Shop;
let tenantId: string;
let token: string;
let readToken: string;
let sender: SenderRow;
const PHONE_NUMBER_ID = "301000000000001";

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { anonymous: 10_000, token: 10_000 } });
  shop = await createShop(env, "Acme", {
    phoneNumber: "+15550100001",
    phoneNumberId: PHONE_NUMBER_ID,
    wabaId: "401000000000001",
    templates: true,
  });
  ({ tenantId, token, sender } = shop);
  readToken = await getToken(env.app, shop.clientId, shop.clientSecret, "messaging:read");
});
afterAll(() => env.close());

const send = (
  body: unknown,
  options: { key?: string; token?: string; headers?: Record<string, string> } = {},
) => postMessage(env.app, options.token ?? token, body, options);

/** The customer writes at `secondsAgo`: their window runs 24 h from then (provider timestamp). */
async function customerWrote(phone: string, secondsAgo = 0): Promise<string> {
  const timestamp = Math.floor(env.clock.now().getTime() / 1000) - secondsAgo;
  const id = await customerWrites(env, PHONE_NUMBER_ID, {
    from: phone.slice(1),
    type: "text",
    text: "hi",
    timestamp,
  });
  const outcome = await finalizeInbound(env.deps.db, env.clock, id);
  return (await messageRow(env.deps.db, outcome!.messageId)).contact_id;
}

describe("POST /v2/messages: accepted", () => {
  test("a template send to a new number: 201 Message, field by field", async () => {
    const phone = freshPhone();
    const result = await send({ to: phone, recipient_name: "Ana", template: ORDER_SHIPPED });
    expect(result.status).toBe(201);
    expect(result.body).toEqual({
      object: "message",
      id: expect.stringMatching(/^msg_[0-9A-Za-z]{22}$/),
      status: "accepted",
      direction: "outbound",
      channel: "whatsapp",
      sender: sender.id,
      to: { object: "contact", id: expect.stringMatching(/^ctc_[0-9A-Za-z]{22}$/), phone },
      content: {
        kind: "template",
        template: expect.stringMatching(/^tpl_/),
        template_name: "order_shipped",
        language: "en",
      },
      created: Math.floor(env.clock.now().getTime() / 1000),
      client_reference: null,
      send_at: null,
      valid_for: null,
      failure: null,
      retrying: null,
    });
    expect(result.headers.get("idempotency-replayed")).toBeNull();
    expect(result.headers.get("ratelimit-limit")).toBe("1000");
    const row = await messageRow(env.deps.db, result.body.id);
    expect(row).toMatchObject({
      status: "accepted",
      type: "template",
      text: "Hi Ana, your order A-1001 has shipped.",
    });
    const contact = await env.deps.db
      .selectFrom("contacts")
      .select(["name", "phone"])
      .where("id", "=", result.body.to.id)
      .executeTakeFirstOrThrow();
    expect(contact).toEqual({ name: "Ana", phone });
  });

  test("free text inside the window, by contact id; 4,096 characters accepted, 4,097 refused", async () => {
    const phone = freshPhone();
    const contactId = await customerWrote(phone, 60);
    const text = await send({ contact: contactId, body: "Your parcel left our warehouse 🚚 — danke!" });
    expect(text.status).toBe(201);
    expect(text.body.content).toEqual({
      kind: "text",
      preview: "Your parcel left our warehouse 🚚 — danke!",
    });
    expect(text.body.to).toEqual({ object: "contact", id: contactId, phone });
    expect((await send({ contact: contactId, body: "x".repeat(4096) })).status).toBe(201);
    expectApiError(
      await send({ contact: contactId, body: "x".repeat(4097) }),
      400,
      "parameter_invalid",
      "body",
    );
  });

  test("the window: 25 h after the customer's message free text is refused with messaging_state", async () => {
    const phone = freshPhone();
    const contactId = await customerWrote(phone, 25 * 3600);
    const closed = await send({ contact: contactId, body: "hello?" });
    expectApiError(closed, 409, "messaging_window_closed", "body");
    expect(closed.body.error.messaging_state).toEqual({
      sendable: false,
      within_window: false,
      window_expires_at: null,
      requires_template: true,
      opted_out: false,
    });
    // A template is still fine.
    expect((await send({ contact: contactId, template: ORDER_SHIPPED })).status).toBe(201);

    const never = await send({ to: freshPhone(), body: "hello" });
    expectApiError(never, 409, "messaging_window_closed", "body");
    expect(never.body.error.messaging_state.within_window).toBe(false);

    // The customer writes now: open until 24 h from the provider's timestamp.
    await customerWrote(phone, 0);
    expect((await send({ contact: contactId, body: "hello again" })).status).toBe(201);
    env.clock.advance(24 * 3600 + 1);
    const laterToken = await getToken(env.app, shop.clientId, shop.clientSecret);
    const expired = await send({ contact: contactId, body: "too late" }, { token: laterToken });
    env.clock.set(new Date());
    expectApiError(expired, 409, "messaging_window_closed", "body");
  });

  test("template language: omitted is fine with one approved language, ambiguous with several", async () => {
    expect((await send({ to: freshPhone(), template: { name: "welcome" } })).status).toBe(201);
    expectApiError(
      await send({ to: freshPhone(), template: { name: "order_shipped", variables: { body: ["a", "b"] } } }),
      400,
      "parameter_missing",
      "template.language",
    );
    const german = await send({
      to: freshPhone(),
      template: { name: "order_shipped", language: "de", variables: { body: { "1": "Jan", "2": "B-7" } } },
    });
    expect(german.status).toBe(201);
    expect((await messageRow(env.deps.db, german.body.id)).text).toBe(
      "Hallo Jan, deine Bestellung B-7 wurde versandt.",
    );
  });
});

describe("POST /v2/messages: every refusal names its parameter", () => {
  test("shape: template/body and to/contact", async () => {
    const to = freshPhone();
    expectApiError(await send({ to, template: ORDER_SHIPPED, body: "x" }), 400, "parameter_conflict", "body");
    expectApiError(await send({ to }), 400, "parameter_conflict", "template");
    expectApiError(await send({ template: ORDER_SHIPPED }), 400, "parameter_missing", "to");
    expectApiError(
      await send({ to, contact: "ctc_x", template: ORDER_SHIPPED }),
      400,
      "parameter_conflict",
      "contact",
    );
    expectApiError(await send({ to: "12", template: ORDER_SHIPPED }), 400, "parameter_invalid", "to");
    expectApiError(
      await send({ to: "not a number", template: ORDER_SHIPPED }),
      400,
      "parameter_invalid",
      "to",
    );
  });

  test("unknown contact, sender, template; other tenants' ids; flipped case", async () => {
    const contactId = await customerWrote(freshPhone(), 10);
    const flipped = contactId.replace(/[a-z]/, (c) => c.toUpperCase());
    expectApiError(
      await send({ contact: flipped, template: ORDER_SHIPPED }),
      404,
      "resource_missing",
      "contact",
    );
    expectApiError(
      await send({ contact: "ctc_nope", template: ORDER_SHIPPED }),
      404,
      "resource_missing",
      "contact",
    );
    expectApiError(
      await send({ to: freshPhone(), sender: "snd_nope", template: ORDER_SHIPPED }),
      404,
      "resource_missing",
      "sender",
    );

    const other = await createShop(env, "Other", { templates: true });
    const [otherToken, otherSender] = [other.token, other.sender];
    // Another tenant's contact and sender do not exist for us, and ours not for them.
    expectApiError(
      await send({ contact: contactId, template: ORDER_SHIPPED }, { token: otherToken }),
      404,
      "resource_missing",
      "contact",
    );
    expectApiError(
      await send({ to: freshPhone(), sender: otherSender.id, template: ORDER_SHIPPED }),
      404,
      "resource_missing",
      "sender",
    );

    expectApiError(
      await send({ to: freshPhone(), template: { name: "no_such" } }),
      400,
      "template_not_found",
      "template.name",
    );
    expectApiError(
      await send({ to: freshPhone(), template: { name: "summer_sale", variables: { body: ["10%"] } } }),
      400,
      "template_not_found",
      "template.name",
    );
    expectApiError(
      await send({ to: freshPhone(), template: { name: "old_promo" } }),
      400,
      "template_not_found",
      "template.name",
    );
    expectApiError(
      await send({ to: freshPhone(), template: { ...ORDER_SHIPPED, language: "fr" } }),
      400,
      "template_not_found",
      "template.name",
    );
  });

  test("template variables are checked by count and name", async () => {
    const to = freshPhone();
    const with_ = (variables: unknown) =>
      send({ to, template: { name: "order_shipped", language: "en", variables } });
    expectApiError(await with_({ body: ["Ana"] }), 400, "parameter_invalid", "template.variables.body");
    expectApiError(
      await with_({ body: { "1": "Ana" } }),
      400,
      "parameter_missing",
      "template.variables.body.2",
    );
    expectApiError(
      await with_({ body: { "1": "Ana", "2": "x", "3": "y" } }),
      400,
      "parameter_invalid",
      "template.variables.body.3",
    );
    expectApiError(
      await with_({ body: ["Ana", "line\nbreak"] }),
      400,
      "parameter_invalid",
      "template.variables.body.1",
    );
    expectApiError(await with_({ body: ["Ana", ""] }), 400, "parameter_invalid", "template.variables.body.1");
    expectApiError(await with_(undefined), 400, "parameter_missing", "template.variables.body.1");
    expectApiError(
      await with_({ body: ["a", "b"], footer: [] }),
      400,
      "parameter_unknown",
      "template.variables.footer",
    );
    expectApiError(
      await send({ to, template: { name: "welcome", variables: { body: ["surplus"] } } }),
      400,
      "parameter_invalid",
      "template.variables.body",
    );
  });

  test("header and button variables", async () => {
    const to = freshPhone();
    const reminder = { name: "appointment_reminder", variables: { body: ["Monday", "10:00"] } };
    expectApiError(
      await send({ to, template: { ...reminder, buttons: { "0": "A-77" } } }),
      400,
      "parameter_missing",
      "template.header",
    );
    expectApiError(
      await send({ to, template: { ...reminder, header: "the dentist" } }),
      400,
      "parameter_missing",
      "template.buttons.0",
    );
    expectApiError(
      await send({ to, template: { ...reminder, header: "the dentist", buttons: { "0": "A", "1": "B" } } }),
      400,
      "parameter_invalid",
      "template.buttons.1",
    );
    expectApiError(
      await send({ to, template: { name: "welcome", header: "x" } }),
      400,
      "parameter_invalid",
      "template.header",
    );
    const invoice = (header: Record<string, string>) =>
      send({ to, template: { name: "invoice_ready", variables: { body: ["I-1"] }, header } });
    expectApiError(
      await invoice({ type: "video", link: "https://example.com/a.mp4" }),
      400,
      "parameter_invalid",
      "template.header.type",
    );
    expectApiError(
      await invoice({ type: "document", link: "ftp://x" }),
      400,
      "parameter_invalid",
      "template.header.link",
    );
    // A cloud metadata service, or any private address: refused (issue 20); so is plain http.
    for (const link of [
      "https://169.254.169.254/latest/meta-data/",
      "https://[::1]/a.pdf",
      "http://e.com/a.pdf",
    ]) {
      expectApiError(
        await invoice({ type: "document", link }),
        400,
        "parameter_invalid",
        "template.header.link",
      );
    }
    expectApiError(
      await invoice({ type: "document", link: "https://e.com/a.pdf", media: "med_x" }),
      400,
      "parameter_conflict",
      "template.header",
    );
    expectApiError(
      await invoice({ type: "document", media: "med_nope" }),
      404,
      "resource_missing",
      "template.header.media",
    );
  });

  test("an inactive sender: 409 with messaging_state, for templates too", async () => {
    const spare = await addSender(env, tenantId, { templates: true });
    // Two active senders: naming one is required.
    expectApiError(
      await send({ to: freshPhone(), template: ORDER_SHIPPED }),
      400,
      "parameter_missing",
      "sender",
    );
    await setSenderActive(env.deps.db, spare.id, false);
    const refused = await send({ to: freshPhone(), sender: spare.id, template: ORDER_SHIPPED });
    expectApiError(refused, 409, "messaging_window_closed", "sender");
    expect(refused.body.error.messaging_state.sendable).toBe(false);
    // Back to one active sender: chosen automatically again.
    expect((await send({ to: freshPhone(), template: ORDER_SHIPPED })).status).toBe(201);
  });

  test("bad input is a 4xx envelope, never a 5xx", async () => {
    const raw = (rawBody: string, contentType = "application/json") =>
      call(env.app, "POST", "/v2/messages", { rawBody, token, headers: { "content-type": contentType } });
    expectApiError(await raw("{not json"), 400, "invalid_json", null);
    expectApiError(await raw('{"to":"+4915100000000"}', "text/plain"), 400, "invalid_content_type", null);
    expectApiError(await raw(""), 400, "parameter_missing", null);
    expectApiError(await raw("[]"), 400, "parameter_invalid", null);
    expectApiError(await raw('"text"'), 400, "parameter_invalid", null);
    expectApiError(
      await raw(JSON.stringify({ to: "+4915100000000", body: "x".repeat(2_000_000) })),
      413,
      "request_too_large",
      null,
    );
    expectApiError(
      await send({ to: freshPhone(), template: ORDER_SHIPPED, priority: "high" }),
      400,
      "parameter_unknown",
      "priority",
    );
    expectApiError(
      await send({ to: freshPhone(), template: { ...ORDER_SHIPPED, colour: 1 } }),
      400,
      "parameter_unknown",
      "template.colour",
    );
    expectApiError(
      await send({ to: 4915100000000, template: ORDER_SHIPPED }),
      400,
      "parameter_invalid",
      "to",
    );
    expectApiError(
      await send({ to: freshPhone(), template: "order_shipped" }),
      400,
      "parameter_invalid",
      "template",
    );
    // Non-ASCII names and values are data like any other.
    const unicode = await send({
      to: freshPhone(),
      recipient_name: "Zoë Ünal 山田",
      template: { name: "order_shipped", language: "en", variables: { body: ["Zoë 山田", "Ä-1"] } },
    });
    expect(unicode.status).toBe(201);
    // Auth comes before the body: a bad token on a bad body is a 401.
    const unauthenticated = await call(env.app, "POST", "/v2/messages", {
      rawBody: "{not json",
      headers: { "content-type": "application/json" },
    });
    expectApiError(unauthenticated, 401, "unauthorized", null);
    expectApiError(
      await send({ to: freshPhone(), template: ORDER_SHIPPED }, { token: readToken }),
      403,
      "insufficient_scope",
      null,
    );
  });

  test("Idempotency-Key format", async () => {
    const body = { to: freshPhone(), template: ORDER_SHIPPED };
    expectApiError(await send(body, { key: "k".repeat(256) }), 400, "parameter_invalid", "Idempotency-Key");
    expectApiError(await send(body, { key: "" }), 400, "parameter_invalid", "Idempotency-Key");
    expect((await send(body, { key: "k".repeat(255) })).status).toBe(201);
  });
});

describe("idempotency", () => {
  test("same key and body: 200 replay of the original message; one message", async () => {
    const body = { to: freshPhone(), template: ORDER_SHIPPED };
    const first = await send(body, { key: "order-1" });
    expect(first.status).toBe(201);
    const again = await send({ template: ORDER_SHIPPED, to: body.to }, { key: "order-1" });
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    expect(again.body).toEqual(first.body);
    expect(await outboundMessages(env.deps.db, first.body.to.id)).toHaveLength(1);
  });

  test("same key, different body: 400 idempotency_key_reused", async () => {
    const to = freshPhone();
    expect((await send({ to, template: ORDER_SHIPPED }, { key: "order-2" })).status).toBe(201);
    expectApiError(
      await send({ to, template: { name: "welcome" } }, { key: "order-2" }),
      400,
      "idempotency_key_reused",
      "Idempotency-Key",
    );
  });

  test("an error does not consume the key", async () => {
    const to = freshPhone();
    expectApiError(
      await send({ to, body: "window closed" }, { key: "order-3" }),
      409,
      "messaging_window_closed",
      "body",
    );
    expect((await send({ to, template: ORDER_SHIPPED }, { key: "order-3" })).status).toBe(201);
  });

  test("20 concurrent requests with one key: one message", async () => {
    const body = { to: freshPhone(), template: ORDER_SHIPPED };
    const results = await Promise.all(Array.from({ length: 20 }, () => send(body, { key: "burst-1" })));
    const created = results.filter((r) => r.status === 201);
    expect(created).toHaveLength(1);
    for (const r of results) {
      expect([200, 201, 409]).toContain(r.status);
      if (r.status === 200) expect(r.body.id).toBe(created[0]!.body.id);
      if (r.status === 409) {
        expectApiError(r, 409, "idempotency_key_in_use", "Idempotency-Key");
        expect(r.headers.get("retry-after")).toBe("1");
      }
    }
    expect(await outboundMessages(env.deps.db, created[0]!.body.to.id)).toHaveLength(1);
  });

  test("Redis flushed between two same-key requests: still one message (Postgres remembers)", async () => {
    const body = { to: freshPhone(), template: ORDER_SHIPPED };
    const first = await send(body, { key: "flush-1" });
    expect(first.status).toBe(201);
    await deleteRedisPrefix(env.config.redisPrefix);
    const again = await send(body, { key: "flush-1" });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    expectApiError(
      await send({ ...body, template: { name: "welcome" } }, { key: "flush-1" }),
      400,
      "idempotency_key_reused",
      "Idempotency-Key",
    );
    expect(await outboundMessages(env.deps.db, first.body.to.id)).toHaveLength(1);
  });

  test("a key is honoured for 24 hours, then it is free again and its record is dropped", async () => {
    const body = { to: freshPhone(), template: ORDER_SHIPPED };
    const first = await send(body, { key: "day-old" });
    expect(first.status).toBe(201);
    const other = await send({ to: freshPhone(), template: ORDER_SHIPPED }, { key: "day-old-2" });
    expect(other.status).toBe(201);
    env.clock.advance(24 * 3600 + 1);
    try {
      // Redis's copy expires on its own clock; here the injected clock moved, so drop it by hand.
      await deleteRedisPrefix(env.config.redisPrefix);
      const later = await getToken(env.app, shop.clientId, shop.clientSecret);
      const again = await send(body, { key: "day-old", token: later });
      expect(again.status).toBe(201);
      expect(again.body.id).not.toBe(first.body.id);
      expect(await deleteExpired(env.deps.db, env.clock.now(), IDEMPOTENCY_EXPIRY)).toBeGreaterThanOrEqual(1);
      const keys = await env.deps.db
        .selectFrom("idempotency_keys")
        .select(["key", "message_id"])
        .where("key", "in", ["day-old", "day-old-2"])
        .execute();
      expect(keys).toEqual([{ key: "day-old", message_id: again.body.id }]);
    } finally {
      env.clock.set(new Date());
    }
  });

  test("keys are scoped to the application", async () => {
    const other = await createApplication(env.deps.db, { tenantId, name: "Second app", sendLimit: 1000 });
    const otherToken = await getToken(env.app, other.application.clientId, other.clientSecret);
    const body = { to: freshPhone(), template: ORDER_SHIPPED };
    const mine = await send(body, { key: "shared-key" });
    const theirs = await send(body, { key: "shared-key", token: otherToken });
    expect([mine.status, theirs.status]).toEqual([201, 201]);
    expect(theirs.body.id).not.toBe(mine.body.id);
  });
});

describe("daily quota", () => {
  test("quota of 2: the third send is 429 until midnight UTC; replays and errors do not count; a lost counter is rebuilt", async () => {
    const small = await createShop(env, "Small shop", { dailyQuota: 2, templates: true });
    const sendAs = (body: unknown, key?: string) => send(body, { token: small.token, key });

    expectApiError(
      await sendAs({ to: freshPhone(), template: { name: "nope" } }),
      400,
      "template_not_found",
      "template.name",
    );
    const first = await sendAs({ to: freshPhone(), template: ORDER_SHIPPED }, "q-1");
    expect(first.status).toBe(201);
    expect((await sendAs({ to: first.body.to.phone, template: ORDER_SHIPPED }, "q-1")).status).toBe(200);
    expect((await sendAs({ to: freshPhone(), template: ORDER_SHIPPED })).status).toBe(201);

    const refused = await sendAs({ to: freshPhone(), template: ORDER_SHIPPED });
    expectApiError(refused, 429, "quota_exceeded", null);
    const now = env.clock.now();
    const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
    expect(Number(refused.headers.get("retry-after"))).toBe(Math.ceil((midnight - now.getTime()) / 1000));
    expect(refused.headers.get("ratelimit-limit")).toBe("1000");

    await deleteRedisPrefix(env.config.redisPrefix);
    expectApiError(await sendAs({ to: freshPhone(), template: ORDER_SHIPPED }), 429, "quota_exceeded", null);

    // A new UTC day, a new quota.
    env.clock.set(new Date(midnight + 1000));
    const tomorrowToken = await getToken(env.app, small.clientId, small.clientSecret);
    const tomorrow = await send({ to: freshPhone(), template: ORDER_SHIPPED }, { token: tomorrowToken });
    env.clock.set(new Date());
    expect(tomorrow.status).toBe(201);
  });
});

describe("delivery to the provider (real worker processes)", () => {
  test("the provider receives the exact rendered components; status runs to read", async () => {
    const workers = [spawnWorker(env, "send"), spawnWorker(env, "status")];
    try {
      const pdf = new File(
        [new TextEncoder().encode("%PDF-1.4\n% test invoice\n"), new Uint8Array(512)],
        "inv.pdf",
      );
      const media = await uploadMedia(env.deps, tenantId, { file: pdf });
      const cases = [
        {
          template: ORDER_SHIPPED,
          components: [
            {
              type: "body",
              parameters: [
                { type: "text", text: "Ana" },
                { type: "text", text: "A-1001" },
              ],
            },
          ],
        },
        {
          template: {
            name: "appointment_reminder",
            header: "your check-up",
            variables: { body: { "1": "Monday", "2": "10:00" } },
            buttons: { "0": "A-77" },
          },
          components: [
            { type: "header", parameters: [{ type: "text", text: "your check-up" }] },
            {
              type: "body",
              parameters: [
                { type: "text", text: "Monday" },
                { type: "text", text: "10:00" },
              ],
            },
            { type: "button", sub_type: "url", index: "0", parameters: [{ type: "text", text: "A-77" }] },
          ],
        },
        {
          template: {
            name: "invoice_ready",
            variables: { body: ["I-42"] },
            header: { type: "document", media: media.id, filename: "invoice-42.pdf" },
          },
          components: [
            {
              type: "header",
              parameters: [
                { type: "document", document: { id: media.provider_media_id, filename: "invoice-42.pdf" } },
              ],
            },
            { type: "body", parameters: [{ type: "text", text: "I-42" }] },
          ],
        },
      ];
      for (const { template, components } of cases) {
        const phone = freshPhone();
        const accepted = await send({ to: phone, template });
        expect(accepted.status).toBe(201);
        const [received] = await eventually(async () => {
          const found = await sentTo(env, PHONE_NUMBER_ID, accepted.body.id);
          return found.length > 0 && found;
        });
        expect(received!.payload).toMatchObject({
          messaging_product: "whatsapp",
          to: phone.slice(1),
          type: "template",
          template: { name: template.name, language: { code: "en" }, components },
        });
        await eventually(async () => (await messageRow(env.deps.db, accepted.body.id)).status === "read");
      }
      const reminder = await env.deps.db
        .selectFrom("messages")
        .select("text")
        .where("type", "=", "template")
        .where("text", "like", "Reminder for your check-up%")
        .executeTakeFirstOrThrow();
      expect(reminder.text).toBe("Reminder for your check-up\nSee you on Monday at 10:00.");
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
  });

  test("retryable provider failures are retried until sent; permanent ones fail at once with failure", async () => {
    const worker = spawnWorker(env, "send");
    try {
      await failNextSends(env, 2, 130429);
      const retried = await send({ to: freshPhone(), template: ORDER_SHIPPED });
      const sentRow = await eventually(async () => {
        const row = await messageRow(env.deps.db, retried.body.id);
        return row.provider_message_id !== null && row;
      });
      expect(sentRow.send_attempts).toBe(3);
      expect(sentRow.failure).toBeNull();
      expect(await sentTo(env, PHONE_NUMBER_ID, retried.body.id)).toHaveLength(1);

      await failNextSends(env, 1, 131026);
      const doomed = await send({ to: freshPhone(), template: ORDER_SHIPPED });
      const failed = await eventually(async () => {
        const row = await messageRow(env.deps.db, doomed.body.id);
        return row.status === "failed" && row;
      });
      expect(failed.failure).toEqual({
        code: "recipient_invalid",
        message: expect.any(String),
        retryable: false,
      });
      expect(failed.send_attempts).toBe(1);
    } finally {
      await worker.stop();
    }
  });

  test("a send worker killed mid-send: the provider's echo is adopted, no second send", async () => {
    const workerEnv = { SEND_IN_DOUBT_MS: "20000" };
    const first = spawnWorker(env, "send", workerEnv);
    let second: ReturnType<typeof spawnWorker> | undefined;
    try {
      await fetch(`${env.simulatorUrl}/_sim/slow-next`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ count: 1, delay_ms: 1500 }),
      });
      const accepted = await send({ to: freshPhone(), template: ORDER_SHIPPED });
      // The worker has claimed the attempt and its request is at the provider, which is slow to answer...
      await eventually(
        async () => (await messageRow(env.deps.db, accepted.body.id)).send_started_at !== null,
      );
      await Bun.sleep(500);
      expect(await first.stop("SIGKILL")).not.toBe(0);
      // ...which the provider still gives: the message goes out, and its statuses echo our id.
      await eventually(async () => (await sentTo(env, PHONE_NUMBER_ID, accepted.body.id)).length === 1);
      await eventually(async () =>
        env.deps.db
          .selectFrom("status_events")
          .select("id")
          .where("client_reference", "=", accepted.body.id)
          .executeTakeFirst(),
      );
      expect((await messageRow(env.deps.db, accepted.body.id)).provider_message_id).toBeNull();

      second = spawnWorker(env, "send", workerEnv);
      const adopted = await eventually(async () => {
        const row = await messageRow(env.deps.db, accepted.body.id);
        return row.provider_message_id !== null && row;
      }, 15_000);
      expect(adopted.send_attempts).toBe(1);
      await Bun.sleep(500);
      expect(await sentTo(env, PHONE_NUMBER_ID, accepted.body.id)).toHaveLength(1);
    } finally {
      await second?.stop();
    }
  });

  test("an attempt that never reached the provider is sent once the in-doubt grace has passed", async () => {
    const accepted = await send({ to: freshPhone(), template: ORDER_SHIPPED });
    // As a worker that died after claiming the attempt, before its request left.
    const startedAt = new Date();
    await env.deps.db
      .updateTable("messages")
      .set({ send_started_at: startedAt, send_attempts: 1 })
      .where("id", "=", accepted.body.id)
      .execute();
    const worker = spawnWorker(env, "send", { SEND_IN_DOUBT_MS: "1500" });
    try {
      const sent = await eventually(async () => {
        const row = await messageRow(env.deps.db, accepted.body.id);
        return row.provider_message_id !== null && row;
      });
      // Within the grace nothing is sent (the first attempt might still show up in a webhook): the
      // provider received the one send only after it. Read from the provider's clock, not from a
      // sleep, which a loaded machine can stretch past the grace.
      const sends = await sentTo(env, PHONE_NUMBER_ID, accepted.body.id);
      expect(sends).toHaveLength(1);
      expect(Date.parse(sends[0]?.received_at ?? "")).toBeGreaterThanOrEqual(startedAt.getTime() + 1500);
      expect(sent.send_attempts).toBe(2);
    } finally {
      await worker.stop();
    }
  });
});
