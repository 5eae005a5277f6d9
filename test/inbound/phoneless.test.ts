import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { resolveIdentity } from "../../src/contacts/identity.ts";
import { finalizePendingInbound } from "../../src/inbound/finalize.ts";
import { drainStatusEvents } from "../../src/outbound/status.ts";
import { createShop, customerWrites, freshPhone, type Shop, sentTo } from "../support/fixtures.ts";
import { call, createTestEnv, deliverOne, eventually, type TestEnv } from "../support/index.ts";

let env: TestEnv;
let shop: Shop;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  shop = await createShop(env, "Phone-less shop");
});
afterAll(() => env.close());

const contactOf = (id: string) =>
  env.deps.db.selectFrom("contacts").selectAll().where("id", "=", id).executeTakeFirstOrThrow();

async function messageByProviderId(providerId: string) {
  await finalizePendingInbound(env.deps.db, env.clock);
  return env.deps.db
    .selectFrom("messages")
    .selectAll()
    .where("provider_message_id", "=", providerId)
    .executeTakeFirstOrThrow();
}

async function simulatorUserId(phone: string): Promise<string> {
  // The simulator names every user by a BSUID derived from the phone: the webhook carries it.
  const providerId = await customerWrites(env, shop.phoneNumberId, {
    from: phone,
    type: "text",
    text: "hello",
  });
  const message = await messageByProviderId(providerId);
  const contact = await contactOf(message.contact_id);
  expect(contact.user_id).not.toBeNull();
  return contact.user_id!;
}

describe("customers without a phone number (DESIGN §14)", () => {
  test("a phone-less customer's message is stored, in the feed, and the reply goes out by recipient", async () => {
    const userId = "DE.7700112233445566";
    const providerId = await customerWrites(env, shop.phoneNumberId, {
      user_id: userId,
      username: "ana.s",
      hide_phone: true,
      type: "text",
      text: "hi, no number here",
    });
    const message = await messageByProviderId(providerId);
    expect(message.text).toBe("hi, no number here");
    const contact = await contactOf(message.contact_id);
    expect(contact).toMatchObject({ phone: null, user_id: userId, username: "ana.s" });
    expect(contact.last_inbound_at).not.toBeNull();

    const { sequenceFeed } = await import("../../src/feed/sequencer.ts");
    await sequenceFeed(env.deps.db);
    const feed = await call(env.app, "GET", "/v2/messages?limit=500", { token: shop.token });
    expect(feed.status).toBe(200);
    const entry = (feed.body as { data: { id: string; contact: unknown }[] }).data.find(
      (m) => m.id === message.id,
    );
    expect(entry?.contact).toMatchObject({ id: contact.id, phone: null, user_id: userId });

    const reply = await call(env.app, "POST", "/v2/messages", {
      token: shop.token,
      body: { contact: contact.id, body: "hello Ana" },
    });
    expect({ status: reply.status, body: reply.body }).toMatchObject({ status: 201 });
    const replyId = (reply.body as { id: string }).id;
    expect(await deliverOne(env.deps, replyId)).toBe("sent");
    const [sent] = await sentTo(env, shop.phoneNumberId, replyId);
    expect(sent?.payload.recipient).toBe(userId);
    expect(sent?.payload.to).toBeUndefined();
  });

  test("a merge while a send to the younger contact is in flight: delivered once, its statuses on the survivor", async () => {
    const phone = freshPhone();
    // The older contact: known by phone only (as every contact from before 2026).
    const olderId = await resolveIdentity(env.deps.db, {
      tenantId: shop.tenantId,
      identity: { phone, userId: null, parentUserId: null, username: null, name: "Ana" },
    });
    const older = await contactOf(olderId);
    expect(older.user_id).toBeNull();
    await Bun.sleep(5);
    // The same person writes with the number withheld: a younger contact, by BSUID only.
    const userId = "DE.880011223344";
    const hidden = await customerWrites(env, shop.phoneNumberId, {
      from: phone,
      user_id: userId,
      hide_phone: true,
      type: "text",
      text: "it's me",
    });
    const younger = (await messageByProviderId(hidden)).contact_id;
    expect(younger).not.toBe(older.id);
    expect(await contactOf(younger)).toMatchObject({ phone: null, user_id: userId });

    const reply = await call(env.app, "POST", "/v2/messages", {
      token: shop.token,
      body: { contact: younger, body: "we see you" },
    });
    expect(reply.status).toBe(201);
    const replyId = (reply.body as { id: string }).id;

    // The send and the message that proves them one person, at once.
    const shown = await customerWrites(env, shop.phoneNumberId, {
      from: phone,
      user_id: userId,
      hide_phone: false,
      type: "text",
      text: "here is my number",
    });
    const [outcome] = await Promise.all([
      deliverOne(env.deps, replyId),
      finalizePendingInbound(env.deps.db, env.clock),
    ]);
    expect(outcome).toBe("sent");
    expect((await messageByProviderId(shown)).contact_id).toBe(older.id);
    expect(await contactOf(younger)).toMatchObject({ merged_into: older.id, phone: null, user_id: null });
    expect(await contactOf(older.id)).toMatchObject({ phone, user_id: userId });

    expect(await sentTo(env, shop.phoneNumberId, replyId)).toHaveLength(1);
    await eventually(async () => {
      // What the status worker does (this file runs none): a status that overtook the send's record
      // of its provider id waits in status_events until a drain applies it.
      await drainStatusEvents(env.deps.db, env.clock);
      const row = await env.deps.db
        .selectFrom("messages")
        .select(["status", "contact_id"])
        .where("id", "=", replyId)
        .executeTakeFirstOrThrow();
      return row.contact_id === older.id && (row.status === "delivered" || row.status === "read");
    });
    // GET /contacts/{merged} answers the survivor (src/contacts/identity.ts findLiveContact).
    const lookup = await call(env.app, "GET", `/v2/contacts/${younger}`, { token: shop.token });
    expect(lookup.status).toBe(200);
  });

  test("number change and BSUID change from the provider's system messages", async () => {
    const phone = freshPhone();
    const newPhone = freshPhone();
    const userId = await simulatorUserId(phone);
    const contactId = (
      await env.deps.db
        .selectFrom("contacts")
        .select("id")
        .where("user_id", "=", userId)
        .executeTakeFirstOrThrow()
    ).id;
    const changed = await fetch(`${env.simulatorUrl}/_sim/users/change_number`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ phone_number_id: shop.phoneNumberId, user_id: userId, new_phone: newPhone }),
    });
    expect(changed.status).toBe(200);
    await eventually(async () => {
      await finalizePendingInbound(env.deps.db, env.clock);
      return (await contactOf(contactId)).phone === newPhone;
    });
    const newUserId = "DE.990011223344";
    const renamed = await fetch(`${env.simulatorUrl}/_sim/users/change_user_id`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ phone_number_id: shop.phoneNumberId, user_id: userId, new_user_id: newUserId }),
    });
    expect(renamed.status).toBe(200);
    await eventually(async () => {
      await finalizePendingInbound(env.deps.db, env.clock);
      return (await contactOf(contactId)).user_id === newUserId;
    });
    const byOld = await call(env.app, "GET", `/v2/contacts?user_id=${userId}`, { token: shop.token });
    expect((byOld.body as { id?: string }).id).toBe(contactId);
  });
});
