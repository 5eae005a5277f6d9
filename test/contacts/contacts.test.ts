import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { newId } from "../../src/ids.ts";
import { setSenderActive } from "../../src/senders/repository.ts";
import { createShop, receive, type Shop } from "../support/fixtures.ts";
import {
  call,
  createTestEnv,
  expectApiError,
  expectScopeRequired,
  getToken,
  type TestEnv,
} from "../support/index.ts";
import { epoch, flipCase, insertContact } from "../support/reading.ts";

let env: TestEnv;
let shop: Shop;
let other: Shop;
const HOUR = 3600;
const DAY = 24 * HOUR;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { token: 1000 } });
  shop = await createShop(env, "Shop");
  other = await createShop(env, "Other shop");
});
afterAll(() => env.close());

const now = () => epoch(env.clock.now());
const iso = (seconds: number) => new Date(seconds * 1000).toISOString().replace(".000Z", "Z");
const getContact = (id: string, token = shop.token) => call(env.app, "GET", `/v2/contacts/${id}`, { token });
const findByPhone = (phone: string, token = shop.token) =>
  call(env.app, "GET", `/v2/contacts?phone=${encodeURIComponent(phone)}`, { token });
const findByUserId = (userId: string, token = shop.token) =>
  call(env.app, "GET", `/v2/contacts?user_id=${encodeURIComponent(userId)}`, { token });

/** The BSUID the provider named a contact by (the simulator derives one from the phone), or null. */
const userIdOf = async (contactId: string) =>
  (
    await env.deps.db
      .selectFrom("contacts")
      .select("user_id")
      .where("id", "=", contactId)
      .executeTakeFirstOrThrow()
  ).user_id;

/** A contact row as identity resolution leaves it (DESIGN §14), written directly: the reads are under test. */
const insertIdentity = async (
  tenant: Shop,
  fields: {
    phone?: string | null;
    user_id?: string | null;
    parent_user_id?: string | null;
    username?: string | null;
    name?: string | null;
    merged_into?: string | null;
  },
) =>
  env.deps.db
    .insertInto("contacts")
    .values({ id: newId("ctc"), tenant_id: tenant.tenantId, phone: null, name: null, ...fields })
    .returningAll()
    .executeTakeFirstOrThrow();

/** The customer `from` writes `text` to the tenant, stamped `timestamp` (epoch seconds): their contact's id. */
const contactWhoWrote = async (from: string, text: string, timestamp: number, tenant: Shop = shop) =>
  (await receive(env, tenant, { from, type: "text", text, timestamp })).contactId;

/** A Contact, every field (the channel is always whatsapp). */
const contactBody = (
  id: string,
  name: string | null,
  phone: string | null,
  messaging: unknown,
  identity: { user_id?: string | null; parent_user_id?: string | null; username?: string | null } = {},
) => ({
  object: "contact",
  id,
  name,
  phone,
  user_id: identity.user_id ?? null,
  parent_user_id: identity.parent_user_id ?? null,
  username: identity.username ?? null,
  channel: "whatsapp",
  messaging,
});
/** A Contact's `messaging` with the 24-hour window open until `expiresAt` and a sender to send with. */
const windowOpen = (expiresAt: unknown) => ({
  sendable: true,
  within_window: true,
  window_expires_at: expiresAt,
  requires_template: false,
  opted_out: false,
});
/** A Contact's `messaging` with the window closed: only a template can be sent. */
const WINDOW_CLOSED = {
  sendable: false,
  within_window: false,
  window_expires_at: null,
  requires_template: true,
  opted_out: false,
};

describe("GET /contacts/{contact_id}", () => {
  test("a contact who wrote an hour ago: every field, window open", async () => {
    const wroteAt = now() - HOUR;
    const { contactId } = await receive(env, shop, {
      from: "4915100000001",
      type: "text",
      text: "hello",
      name: "Ana Pérez",
      timestamp: wroteAt,
    });
    const result = await getContact(contactId);
    expect(result.status).toBe(200);
    expect(result.headers.get("request-id")).toMatch(/^req_/);
    expect(result.body).toEqual(
      contactBody(contactId, "Ana Pérez", "+4915100000001", windowOpen(iso(wroteAt + DAY)), {
        user_id: await userIdOf(contactId),
      }),
    );
  });

  test("the window closes by time alone: open until 24 h after the last inbound, closed from then on", async () => {
    const wroteAt = now() - 10;
    const contactId = await contactWhoWrote("4915100000002", "hi", wroteAt);
    const start = env.clock.now();
    try {
      // Tokens expire by the same clock: take one at each moment.
      env.clock.set(new Date((wroteAt + DAY - 1) * 1000));
      let token = await getToken(env.app, shop.clientId, shop.clientSecret);
      expect((await getContact(contactId, token)).body.messaging).toEqual(windowOpen(iso(wroteAt + DAY)));
      env.clock.set(new Date((wroteAt + DAY) * 1000));
      token = await getToken(env.app, shop.clientId, shop.clientSecret);
      expect((await getContact(contactId, token)).body.messaging).toEqual(WINDOW_CLOSED);
    } finally {
      env.clock.set(start);
    }
  });

  test("a customer whose last message is 25 hours old: window closed", async () => {
    const contactId = await contactWhoWrote("4915100000003", "old", now() - 25 * HOUR);
    expect((await getContact(contactId)).body.messaging).toEqual(WINDOW_CLOSED);
  });

  test("a newer message reopens the window from its own timestamp", async () => {
    const from = "4915100000004";
    await contactWhoWrote(from, "old", now() - 30 * HOUR);
    const recent = now() - 60;
    const { contactId } = await receive(env, shop, { from, type: "image", timestamp: recent });
    expect((await getContact(contactId)).body.messaging.window_expires_at).toBe(iso(recent + DAY));
  });

  test("a contact who never wrote (created by a send): no name, window closed", async () => {
    const contact = await insertContact(env, shop, "+4915100000005");
    expect((await getContact(contact.id)).body).toEqual(
      contactBody(contact.id, null, "+4915100000005", WINDOW_CLOSED),
    );
  });

  test("no active sender: inside the window but not sendable", async () => {
    const lonely = await createShop(env, "No sender left");
    const wroteAt = now() - 60;
    const contactId = await contactWhoWrote("4915100000006", "x", wroteAt, lonely);
    await setSenderActive(env.deps.db, lonely.sender.id, false);
    const result = await getContact(contactId, lonely.token);
    // The window is open, but there is no sender to send with.
    expect(result.body.messaging).toEqual({
      ...windowOpen(iso(wroteAt + DAY)),
      sendable: false,
      requires_template: true,
    });
  });

  test("unknown id, id in another letter case, and another tenant's contact are 404", async () => {
    const { contactId } = await receive(env, shop, { from: "4915100000007", type: "text", text: "x" });
    expectApiError(await getContact("ctc_doesNotExist0000000000"), 404, "resource_missing", "contact_id");
    expectApiError(await getContact(flipCase(contactId)), 404, "resource_missing", "contact_id");
    expectApiError(await getContact(contactId, other.token), 404, "resource_missing", "contact_id");
  });

  test("a malformed id is 400", async () => {
    expectApiError(await getContact("msg_abc"), 400, "parameter_invalid", "contact_id");
    expectApiError(await getContact("ctc_a-b"), 400, "parameter_invalid", "contact_id");
  });
});

describe("GET /contacts?phone=", () => {
  let contactId: string;

  beforeAll(async () => {
    ({ contactId } = await receive(env, shop, {
      from: "4915123450000",
      type: "text",
      text: "by phone",
      name: "Bo",
      timestamp: now() - 120,
    }));
  });

  test("returns the single Contact (not a list), whatever way the number is written", async () => {
    for (const phone of ["+4915123450000", "4915123450000", "+49 151 23450000", "+49 (151) 234-50000"]) {
      const result = await findByPhone(phone);
      expect(result.status).toBe(200);
      expect(result.body).toEqual(
        contactBody(
          contactId,
          "Bo",
          "+4915123450000",
          windowOpen(expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)),
          { user_id: await userIdOf(contactId) },
        ),
      );
    }
  });

  test("neither phone nor user_id is 400 parameter_missing; a malformed phone 400 parameter_invalid", async () => {
    expectApiError(
      await call(env.app, "GET", "/v2/contacts", { token: shop.token }),
      400,
      "parameter_missing",
      "phone",
    );
    for (const phone of ["", "abc", "+12", "not-a-phone-number"]) {
      expectApiError(await findByPhone(phone), 400, "parameter_invalid", "phone");
    }
  });

  test("an unknown number, and another tenant's contact, are 404", async () => {
    expectApiError(await findByPhone("+4915199999999"), 404, "resource_missing", "phone");
    expectApiError(await findByPhone("+4915123450000", other.token), 404, "resource_missing", "phone");
  });
});

describe("customers without a phone number (DESIGN §14)", () => {
  test("a phone-less contact: phone null, its BSUID and username", async () => {
    const contact = await insertIdentity(shop, { user_id: "DE.1000000000001", username: "jonas.k" });
    const result = await getContact(contact.id);
    expect(result.status).toBe(200);
    expect(result.body).toEqual(
      contactBody(contact.id, null, null, WINDOW_CLOSED, {
        user_id: "DE.1000000000001",
        username: "jonas.k",
      }),
    );
  });

  test("GET /contacts?user_id= finds by current, former and parent BSUID; nobody else's", async () => {
    const contact = await insertIdentity(shop, {
      user_id: "DE.1000000000002",
      parent_user_id: "DE.ENT.1000000000002",
      username: "mia",
    });
    // A BSUID it had before user_changed_user_id still finds it.
    await env.deps.db
      .insertInto("contact_user_ids")
      .values([
        { tenant_id: shop.tenantId, user_id: "DE.1000000000002", contact_id: contact.id },
        { tenant_id: shop.tenantId, user_id: "DE.999000000002", contact_id: contact.id },
      ])
      .execute();
    const expected = contactBody(contact.id, null, null, WINDOW_CLOSED, {
      user_id: "DE.1000000000002",
      parent_user_id: "DE.ENT.1000000000002",
      username: "mia",
    });
    for (const userId of ["DE.1000000000002", "DE.999000000002", "DE.ENT.1000000000002"]) {
      const result = await findByUserId(userId);
      expect(result.status).toBe(200);
      expect(result.body).toEqual(expected);
    }
    expectApiError(await findByUserId("DE.1000000000003"), 404, "resource_missing", "user_id");
    expectApiError(await findByUserId("DE.1000000000002", other.token), 404, "resource_missing", "user_id");
    // A username is shown, never a key.
    expectApiError(await findByUserId("mia"), 400, "parameter_invalid", "user_id");
  });

  test("a malformed user_id is 400 parameter_invalid; phone and user_id together 400 parameter_conflict", async () => {
    for (const userId of [
      "",
      "de.123",
      "DE123",
      "DE.",
      "DE.12-34",
      "DEU.123",
      `DE.${"1".repeat(129)}`,
      "+4915100000001",
    ]) {
      expectApiError(await findByUserId(userId), 400, "parameter_invalid", "user_id");
    }
    expectApiError(
      await call(env.app, "GET", "/v2/contacts?phone=%2B4915123450000&user_id=DE.1000000000002", {
        token: shop.token,
      }),
      400,
      "parameter_conflict",
      "user_id",
    );
  });

  test("a merged contact's id resolves to the survivor: GET, its history, opt-out", async () => {
    const wroteAt = now() - 60;
    const { contactId: survivorId } = await receive(env, shop, {
      from: "4915100000100",
      type: "text",
      text: "from the survivor",
      timestamp: wroteAt,
    });
    const merged = await insertIdentity(shop, { merged_into: survivorId });
    const result = await getContact(merged.id);
    expect(result.status).toBe(200);
    expect(result.body.id).toBe(survivorId);
    expect(result.body).toEqual((await getContact(survivorId)).body);

    const history = await call(env.app, "GET", `/v2/contacts/${merged.id}/messages`, { token: shop.token });
    expect(history.status).toBe(200);
    expect(history.body.data.map((m: { text: string }) => m.text)).toEqual(["from the survivor"]);

    const optOut = await call(env.app, "POST", `/v2/contacts/${merged.id}/opt_out`, { token: shop.token });
    expect(optOut.status).toBe(200);
    expect(optOut.body.id).toBe(survivorId);
    expect((await getContact(survivorId)).body.messaging.opted_out).toBe(true);
    // Another tenant still does not see it.
    expectApiError(await getContact(merged.id, other.token), 404, "resource_missing", "contact_id");
  });
});

describe("access", () => {
  test("both need a token with messaging:read", async () => {
    await expectScopeRequired(env, "messaging:read", [
      ["GET", "/v2/contacts/ctc_abc"],
      ["GET", "/v2/contacts?phone=%2B4915123450000"],
      ["GET", "/v2/contacts?user_id=DE.1000000000002"],
    ]);
  });
});
