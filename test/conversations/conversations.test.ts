import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createShop, receive, type Shop } from "../support/fixtures.ts";
import { call, createTestEnv, expectApiError, expectScopeRequired, type TestEnv } from "../support/index.ts";
import { epoch, expectLimitBounds, insertOutbound } from "../support/reading.ts";

let env: TestEnv;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { token: 1000 } });
});
afterAll(() => env.close());

const conversations = (tenant: Shop, query = "") =>
  call(env.app, "GET", `/v2/conversations${query}`, { token: tenant.token });
const at = (seconds: number, ms = 0) => new Date(seconds * 1000 + ms);
const contactIds = (body: { data: { contact: { id: string } }[] }) => body.data.map((c) => c.contact.id);

describe("GET /conversations", () => {
  let shop: Shop;
  let expected: Record<string, unknown>[];

  beforeAll(async () => {
    shop = await createShop(env, "Shop");
    const t0 = epoch(env.clock.now()) - 7200;
    const inbound = (from: string, timestamp: number, name: string, text = "hello") =>
      receive(env, shop, { from, type: "text", text, timestamp, name });

    // Three unanswered messages: all unread.
    const ana = "4915100010001";
    await inbound(ana, t0, "Ana");
    await inbound(ana, t0 + 1, "Ana");
    const anaLast = await inbound(ana, t0 + 2, "Ana", "still waiting");

    // Answered: our reply resets unread.
    const bo = "4915100010002";
    const boFirst = await inbound(bo, t0 + 3, "Bo");
    await inbound(bo, t0 + 4, "Bo");
    const boReply = await insertOutbound(env, shop, {
      contactId: boFirst.contactId,
      text: "On its way",
      createdAt: at(t0 + 5),
    });

    // Answered, then the customer wrote again: one unread.
    const cy = "4915100010003";
    const cyFirst = await inbound(cy, t0 + 6, "Cy");
    await insertOutbound(env, shop, { contactId: cyFirst.contactId, createdAt: at(t0 + 7), status: "read" });
    const cyLast = await receive(env, shop, {
      from: cy,
      type: "image",
      caption: "see photo",
      timestamp: t0 + 8,
    });

    // Our failed message, then a customer message the provider stamped a second before it (arriving
    // late): not unread, and not the last message. (One stamped the same second sorts after ours:
    // test/inbound/inbound.test.ts.)
    const di = "4915100010004";
    const diFirst = await inbound(di, t0 + 1, "Di");
    const failure = { code: "recipient_invalid", message: "Not on WhatsApp.", retryable: false } as const;
    const diReply = await insertOutbound(env, shop, {
      contactId: diFirst.contactId,
      type: "template",
      text: "Your order shipped.",
      status: "failed",
      failure,
      createdAt: at(t0 + 9, 500),
    });
    await inbound(di, t0 + 8, "Di", "late");

    // System notices make no conversation.
    await receive(env, shop, {
      from: "4915100010005",
      type: "system",
      text: "changed number",
      timestamp: t0 + 10,
    });

    // The BSUID the provider named each customer by (the simulator derives one from the phone).
    const userIds = new Map(
      (await env.deps.db.selectFrom("contacts").select(["id", "user_id"]).execute()).map((row) => [
        row.id,
        row.user_id,
      ]),
    );
    const contact = (id: string, name: string, phone: string) => ({
      object: "contact",
      id,
      name,
      phone,
      user_id: userIds.get(id) ?? null,
      parent_user_id: null,
      username: null,
      channel: "whatsapp",
    });
    expected = [
      {
        object: "conversation",
        contact: contact(diFirst.contactId, "Di", "+4915100010004"),
        last_message: {
          id: diReply,
          direction: "outbound",
          type: "template",
          preview: "Your order shipped.",
          text: "Your order shipped.",
          media: null,
          status: "failed",
          failure,
          client_reference: null,
          created: t0 + 9,
        },
        unread: 0,
      },
      {
        object: "conversation",
        contact: contact(cyFirst.contactId, "Cy", "+4915100010003"),
        last_message: {
          id: cyLast.messageId,
          direction: "inbound",
          type: "image",
          preview: expect.stringMatching(/^\[image: image\.[a-z0-9]+\]$/),
          text: "see photo",
          media: { type: "image", filename: null },
          status: null,
          failure: null,
          client_reference: null,
          created: t0 + 8,
        },
        unread: 1,
      },
      {
        object: "conversation",
        contact: contact(boFirst.contactId, "Bo", "+4915100010002"),
        last_message: {
          id: boReply,
          direction: "outbound",
          type: "text",
          preview: "On its way",
          text: "On its way",
          media: null,
          status: "accepted",
          failure: null,
          client_reference: null,
          created: t0 + 5,
        },
        unread: 0,
      },
      {
        object: "conversation",
        contact: contact(anaLast.contactId, "Ana", "+4915100010001"),
        last_message: {
          id: anaLast.messageId,
          direction: "inbound",
          type: "text",
          preview: "still waiting",
          text: "still waiting",
          media: null,
          status: null,
          failure: null,
          client_reference: null,
          created: t0 + 2,
        },
        unread: 3,
      },
    ];
  });

  test("one per contact, newest last message first, with unread counts; every field", async () => {
    const result = await conversations(shop);
    expect(result.status).toBe(200);
    expect(result.body).toEqual({
      object: "list",
      url: "/v2/conversations",
      has_more: false,
      data: expected,
    });
  });

  test("order=asc is oldest first", async () => {
    const result = await conversations(shop, "?order=asc");
    expect(result.body.data).toEqual([...expected].reverse());
  });

  test("before returns conversations whose last message is older, in the chosen order", async () => {
    const boCreated = (expected[2]!.last_message as { created: number }).created;
    const desc = await conversations(shop, `?before=${boCreated}`);
    expect(desc.body).toEqual({
      object: "list",
      url: "/v2/conversations",
      has_more: false,
      data: [expected[3]],
    });
    const cyCreated = (expected[1]!.last_message as { created: number }).created;
    const asc = await conversations(shop, `?before=${cyCreated}&order=asc`);
    expect(asc.body.data).toEqual([expected[3], expected[2]]);
    expect((await conversations(shop, "?before=0")).body.data).toEqual([]);
  });

  test("a new inbound message moves its conversation to the top and counts as unread", async () => {
    const tenant = await createShop(env, "Moving");
    const t0 = epoch(env.clock.now()) - 600;
    const first = await receive(env, tenant, {
      from: "4915100011001",
      type: "text",
      text: "a",
      timestamp: t0,
    });
    const second = await receive(env, tenant, {
      from: "4915100011002",
      type: "text",
      text: "b",
      timestamp: t0 + 1,
    });
    expect(contactIds((await conversations(tenant)).body)).toEqual([second.contactId, first.contactId]);
    await receive(env, tenant, { from: "4915100011001", type: "text", text: "again", timestamp: t0 + 2 });
    const result = await conversations(tenant);
    expect(contactIds(result.body)).toEqual([first.contactId, second.contactId]);
    expect(result.body.data.map((c: { unread: number }) => c.unread)).toEqual([2, 1]);
  });
});

describe("paging", () => {
  test("before = the last item's created walks every conversation once, newest first", async () => {
    const tenant = await createShop(env, "Many");
    const t0 = epoch(env.clock.now()) - 3600;
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      ids.push(
        (
          await receive(env, tenant, {
            from: `49151000200${10 + i}`,
            type: "text",
            text: "x",
            timestamp: t0 + i,
          })
        ).contactId,
      );
    }
    const seen: string[] = [];
    let query = "?limit=5";
    const pages: number[] = [];
    for (;;) {
      const result = await conversations(tenant, query);
      seen.push(...contactIds(result.body));
      pages.push(result.body.data.length);
      if (!result.body.has_more) break;
      query = `?limit=5&before=${result.body.data.at(-1).last_message.created}`;
    }
    expect(pages).toEqual([5, 5, 2]);
    expect(seen).toEqual([...ids].reverse());
  });

  test("a page never splits a second: it stops before it, and the next page holds all of it", async () => {
    const tenant = await createShop(env, "Same second");
    const s = epoch(env.clock.now()) - 3600;
    const receiveAt = async (from: string, timestamp: number) =>
      (await receive(env, tenant, { from, type: "text", text: "x", timestamp })).contactId;
    const newest = await receiveAt("4915100030001", s + 2);
    const tied = [
      await receiveAt("4915100030002", s + 1),
      await receiveAt("4915100030003", s + 1),
      await receiveAt("4915100030004", s + 1),
    ];
    const oldest = await receiveAt("4915100030005", s);

    const first = await conversations(tenant, "?limit=3");
    expect(contactIds(first.body)).toEqual([newest]);
    expect(first.body.has_more).toBe(true);
    const second = await conversations(tenant, `?limit=3&before=${s + 2}`);
    expect(contactIds(second.body)).toEqual([...tied].reverse());
    expect(second.body.has_more).toBe(true);
    const third = await conversations(tenant, `?limit=3&before=${s + 1}`);
    expect(third.body).toMatchObject({ has_more: false });
    expect(contactIds(third.body)).toEqual([oldest]);
  });

  test("the default limit is 25", async () => {
    const tenant = await createShop(env, "Default limit");
    const t0 = epoch(env.clock.now()) - 3600;
    for (let i = 0; i < 26; i++) {
      await receive(env, tenant, {
        from: `49151000400${10 + i}`,
        type: "text",
        text: "x",
        timestamp: t0 + i,
      });
    }
    const result = await conversations(tenant);
    expect(result.body.data).toHaveLength(25);
    expect(result.body.has_more).toBe(true);
  });
});

describe("parameters", () => {
  let tenant: Shop;

  beforeAll(async () => {
    tenant = await createShop(env, "Params");
    await receive(env, tenant, { from: "4915100050001", type: "text", text: "x" });
    await receive(env, tenant, { from: "4915100050002", type: "text", text: "y" });
  });

  test("limit 1 and 100 are accepted; 0, 101, a fraction and text are 400 naming limit", async () => {
    await expectLimitBounds((query) => conversations(tenant, query), 100, 2, ["0", "101", "2.5", "ten", ""]);
  });

  test("before must be whole epoch seconds; order asc or desc", async () => {
    for (const before of ["-1", "1.5", "yesterday", "2026-01-01T00:00:00Z", ""]) {
      expectApiError(await conversations(tenant, `?before=${before}`), 400, "parameter_invalid", "before");
    }
    for (const order of ["up", "DESC", ""]) {
      expectApiError(await conversations(tenant, `?order=${order}`), 400, "parameter_invalid", "order");
    }
  });
});

describe("tenants and access", () => {
  test("each tenant sees only its own conversations, even for the same phone number", async () => {
    const one = await createShop(env, "One");
    const two = await createShop(env, "Two");
    const mine = await receive(env, one, { from: "4915100060001", type: "text", text: "to one" });
    const theirs = await receive(env, two, { from: "4915100060001", type: "text", text: "to two" });
    const oneList = await conversations(one);
    expect(contactIds(oneList.body)).toEqual([mine.contactId]);
    expect(oneList.body.data[0].last_message.text).toBe("to one");
    expect(contactIds((await conversations(two)).body)).toEqual([theirs.contactId]);
  });

  test("needs messaging:read", async () => {
    await expectScopeRequired(env, "messaging:read", [["GET", "/v2/conversations"]]);
  });
});
