import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { MessageFailure } from "../../src/db/schema.ts";
import { createShop, receive, type Shop } from "../support/fixtures.ts";
import { call, createTestEnv, expectApiError, expectScopeRequired, type TestEnv } from "../support/index.ts";
import { epoch, expectLimitBounds, flipCase, insertContact, insertOutbound } from "../support/reading.ts";

let env: TestEnv;
let shop: Shop;
let other: Shop;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { token: 1000 } });
  shop = await createShop(env, "Shop");
  other = await createShop(env, "Other shop");
});
afterAll(() => env.close());

const history = (contactId: string, query = "", token = shop.token) =>
  call(env.app, "GET", `/v2/contacts/${contactId}/messages${query}`, { token });

const LONG_TEXT = Array.from({ length: 400 }, (_, i) => `line ${i}: ünïcödé — 🙂\ttab`)
  .join("\n")
  .concat("\r\n\r\n")
  .padEnd(10_000, "z")
  .slice(0, 10_000);

/** How the failed template below failed, as stored and as the API shows it. */
const RECIPIENT_INVALID: MessageFailure = {
  code: "recipient_invalid",
  message: "The number cannot receive messages.",
  retryable: false,
};

describe("GET /contacts/{contact_id}/messages", () => {
  let contactId: string;
  let expected: Record<string, unknown>[];

  beforeAll(async () => {
    const t0 = epoch(env.clock.now()) - 3600;
    const from = "4915100001000";
    const inbound = async (fields: Parameters<typeof receive>[2]) =>
      (await receive(env, shop, fields)).messageId;
    const long = await receive(env, shop, { from, type: "text", text: LONG_TEXT, timestamp: t0 });
    const longId = long.messageId;
    contactId = long.contactId;
    const captioned = await inbound({
      from,
      type: "image",
      caption: "my parcel\nis damaged",
      timestamp: t0 + 1,
    });
    const bareImage = await inbound({ from, type: "image", timestamp: t0 + 2 });
    const video = await inbound({ from, type: "video", caption: "unboxing", timestamp: t0 + 3 });
    const document = await inbound({ from, type: "document", filename: "invoice-42.pdf", timestamp: t0 + 4 });
    const audio = await inbound({ from, type: "audio", timestamp: t0 + 5 });
    await inbound({ from, type: "system", text: "The customer changed their number", timestamp: t0 + 6 });
    const sentText = await insertOutbound(env, shop, {
      contactId,
      text: "Thanks, we are on it.\nBest,\nShop",
      status: "delivered",
      createdAt: new Date((t0 + 7) * 1000 + 250),
    });
    const template = await insertOutbound(env, shop, {
      contactId,
      type: "template",
      text: "Your invoice 42 is ready.",
      status: "sent",
      media: { type: "document", filename: "invoice-42.pdf" },
      createdAt: new Date((t0 + 8) * 1000),
    });
    const failed = await insertOutbound(env, shop, {
      contactId,
      type: "template",
      text: "Hi Ana, your order 7 has shipped.",
      status: "failed",
      failure: RECIPIENT_INVALID,
      createdAt: new Date((t0 + 9) * 1000),
    });
    const legacy = await insertOutbound(env, shop, {
      contactId,
      id: null,
      text: "Imported from the old system",
      status: "read",
      // Legacy rows predate everything else.
      createdAt: new Date((t0 - 60) * 1000),
    });

    const message = (fields: Record<string, unknown>) => ({
      object: "message",
      direction: "inbound",
      media: null,
      status: null,
      failure: null,
      client_reference: null,
      retrying: null,
      ...fields,
    });
    /** Inbound media without a filename: the preview names the file the provider made up. */
    const unnamedMedia = (id: string, type: string, text: string | null, created: number) =>
      message({
        id,
        type,
        preview: expect.stringMatching(new RegExp(`^\\[${type}: ${type}\\.[a-z0-9]+\\]$`)),
        text,
        media: { type, filename: null },
        created,
      });
    /** An outbound message: its preview is its text. */
    const outbound = (
      id: string | null,
      type: string,
      text: string,
      status: string,
      created: number,
      fields: Record<string, unknown> = {},
    ) => message({ id, direction: "outbound", type, preview: text, text, status, created, ...fields });
    expected = [
      outbound(legacy, "text", "Imported from the old system", "read", t0 - 60),
      message({ id: longId, type: "text", preview: LONG_TEXT, text: LONG_TEXT, created: t0 }),
      unnamedMedia(captioned, "image", "my parcel\nis damaged", t0 + 1),
      unnamedMedia(bareImage, "image", null, t0 + 2),
      unnamedMedia(video, "video", "unboxing", t0 + 3),
      message({
        id: document,
        type: "document",
        preview: "[document: invoice-42.pdf]",
        text: null,
        media: { type: "document", filename: "invoice-42.pdf" },
        created: t0 + 4,
      }),
      unnamedMedia(audio, "audio", null, t0 + 5),
      outbound(sentText, "text", "Thanks, we are on it.\nBest,\nShop", "delivered", t0 + 7),
      outbound(template, "template", "Your invoice 42 is ready.", "sent", t0 + 8, {
        media: { type: "document", filename: "invoice-42.pdf" },
      }),
      outbound(failed, "template", "Hi Ana, your order 7 has shipped.", "failed", t0 + 9, {
        failure: RECIPIENT_INVALID,
      }),
    ];
  });

  test("inbound and outbound messages of every type, oldest first, every field; no system notices", async () => {
    const result = await history(contactId);
    expect(result.status).toBe(200);
    expect(result.body).toEqual({
      object: "list",
      url: `/v2/contacts/${contactId}/messages`,
      has_more: false,
      data: expected,
    });
    // The 10,000-character body comes back byte for byte, line breaks and all.
    expect(result.body.data[1].text).toBe(LONG_TEXT);
    expect(result.body.data[0].id).toBeNull();
  });

  test("order=desc is newest first; the url is the path as requested, without the query", async () => {
    const result = await history(contactId, "?order=desc&limit=200");
    expect(result.body).toEqual({
      object: "list",
      url: `/v2/contacts/${contactId}/messages`,
      has_more: false,
      data: [...expected].reverse(),
    });
  });

  test("before lists strictly older messages, in the chosen order", async () => {
    const pivot = expected[7]!.id as string; // the outbound text
    const asc = await history(contactId, `?before=${pivot}`);
    expect(asc.body.data).toEqual(expected.slice(0, 7));
    expect(asc.body.has_more).toBe(false);
    const desc = await history(contactId, `?before=${pivot}&order=desc&limit=2`);
    expect(desc.body.data).toEqual([expected[6], expected[5]]);
    expect(desc.body.has_more).toBe(true);
    const ascLimited = await history(contactId, `?before=${pivot}&order=asc&limit=2`);
    expect(ascLimited.body.data).toEqual([expected[0], expected[1]]);
    expect(ascLimited.body.has_more).toBe(true);
    const oldestWithId = expected[1]!.id as string;
    expect((await history(contactId, `?before=${oldestWithId}`)).body).toMatchObject({
      has_more: false,
      data: [expected[0]],
    });
  });

  test("limit=1 pages newest first through everything with before", async () => {
    const seen: unknown[] = [];
    let before = "";
    for (let page = 0; page < 20; page++) {
      const result = await history(contactId, `?order=desc&limit=1${before}`);
      expect(result.status).toBe(200);
      seen.push(...result.body.data);
      if (!result.body.has_more) break;
      before = `&before=${result.body.data[0].id}`;
    }
    expect(seen).toEqual([...expected].reverse());
  });
});

describe("same-second messages", () => {
  test("keep one stable order; paging by before neither skips nor repeats", async () => {
    const second = epoch(env.clock.now()) - 600;
    const from = "4915100002000";
    const ids: string[] = [];
    let contactId = "";
    for (let i = 0; i < 7; i++) {
      const received = await receive(env, shop, {
        from,
        type: "text",
        text: `same second ${i}`,
        timestamp: second,
      });
      ids.push(received.messageId);
      contactId = received.contactId;
    }
    const all = await history(contactId, "?limit=200");
    expect(all.body.data.map((m: { id: string }) => m.id)).toEqual(ids);
    expect(all.body.data.every((m: { created: number }) => m.created === second)).toBe(true);

    for (const limit of [1, 2, 3]) {
      const paged: string[] = [];
      let query = `?order=desc&limit=${limit}`;
      for (;;) {
        const result = await history(contactId, query);
        paged.push(...result.body.data.map((m: { id: string }) => m.id));
        if (!result.body.has_more) break;
        query = `?order=desc&limit=${limit}&before=${paged.at(-1)}`;
      }
      expect(paged).toEqual([...ids].reverse());
    }
    const repeat = await history(contactId, "?order=desc&limit=200");
    expect(repeat.body.data.map((m: { id: string }) => m.id)).toEqual([...ids].reverse());
  });
});

describe("parameters", () => {
  let contactId: string;
  let messageId: string;

  beforeAll(async () => {
    ({ contactId, messageId } = await receive(env, shop, {
      from: "4915100003000",
      type: "text",
      text: "one",
    }));
    await receive(env, shop, { from: "4915100003000", type: "text", text: "two" });
  });

  test("limit 1 and 200 are accepted; 0, 201, a fraction, text and empty are 400 naming limit", async () => {
    await expectLimitBounds((query) => history(contactId, query), 200, 2, [
      "0",
      "201",
      "1.5",
      "abc",
      "",
      "-1",
    ]);
  });

  test("the default limit is 50", async () => {
    const from = "4915100004000";
    let contact = "";
    const t0 = epoch(env.clock.now()) - 7200;
    for (let i = 0; i < 51; i++) {
      contact = (await receive(env, shop, { from, type: "text", text: `m${i}`, timestamp: t0 + i }))
        .contactId;
    }
    const result = await history(contact);
    expect(result.body.data).toHaveLength(50);
    expect(result.body.has_more).toBe(true);
    expect(result.body.data[0].text).toBe("m0");
  });

  test("order other than asc/desc is 400 naming order", async () => {
    for (const order of ["newest", "ASC", ""]) {
      expectApiError(await history(contactId, `?order=${order}`), 400, "parameter_invalid", "order");
    }
  });

  test("before: malformed, unknown, another contact's or another tenant's message is 400 naming before", async () => {
    const elsewhere = await receive(env, shop, { from: "4915100003001", type: "text", text: "someone else" });
    const foreign = await receive(env, other, { from: "4915100003000", type: "text", text: "other tenant" });
    for (const before of [
      "abc",
      "msg_",
      "msg_doesNotExist000000000",
      flipCase(messageId),
      elsewhere.messageId,
      foreign.messageId,
    ]) {
      expectApiError(
        await history(contactId, `?before=${encodeURIComponent(before)}`),
        400,
        "parameter_invalid",
        "before",
      );
    }
  });

  test("an unknown parameter is 400", async () => {
    const result = await history(contactId, "?after=msg_x");
    expect(result.status).toBe(400);
    expect(result.body.error.param).toBe("after");
  });
});

describe("tenants and access", () => {
  test("another tenant's contact, an unknown or case-changed id are 404; malformed is 400", async () => {
    const mine = await receive(env, shop, { from: "4915100005000", type: "text", text: "mine" });
    const theirs = await receive(env, other, { from: "4915100005000", type: "text", text: "theirs" });
    expectApiError(await history(theirs.contactId), 404, "resource_missing", "contact_id");
    expectApiError(await history(mine.contactId, "", other.token), 404, "resource_missing", "contact_id");
    expectApiError(await history(flipCase(mine.contactId)), 404, "resource_missing", "contact_id");
    expectApiError(await history("ctc_unknown000000000000000"), 404, "resource_missing", "contact_id");
    expectApiError(await history("nope"), 400, "parameter_invalid", "contact_id");
    // Each tenant sees only its own message for the same phone number.
    expect(
      (await history(theirs.contactId, "", other.token)).body.data.map((m: { text: string }) => m.text),
    ).toEqual(["theirs"]);
  });

  test("a contact with no messages has an empty history", async () => {
    const contact = await insertContact(env, shop, "+4915100006000");
    expect((await history(contact.id)).body).toEqual({
      object: "list",
      url: `/v2/contacts/${contact.id}/messages`,
      has_more: false,
      data: [],
    });
  });

  test("needs messaging:read", async () => {
    await expectScopeRequired(env, "messaging:read", [["GET", "/v2/contacts/ctc_x/messages"]]);
  });
});
