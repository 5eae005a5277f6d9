import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import { buildWebhook } from "../../src/channel/webhook-payloads.ts";
import { sequenceFeed } from "../../src/feed/sequencer.ts";
import { finalizePendingInbound } from "../../src/inbound/finalize.ts";
import { drainStatusEvents } from "../../src/outbound/status.ts";
import { bsuidForPhone } from "../../src/simulator/users.ts";
import {
  createShop,
  customerWrites,
  freshPhone,
  ORDER_SHIPPED,
  type Shop,
  statusEventsOf,
  storeMessage,
} from "../support/fixtures.ts";
import { call, createTestEnv, deliverOne, eventually, postWebhook, type TestEnv } from "../support/index.ts";

/**
 * DESIGN §14: "Statuses that carry `recipient_user_id` attach it to the message's contact by the
 * same rule": statuses from the simulator over HTTP (the webhook store applies them at once), and
 * statuses that overtook their send (stored, then drained).
 */

let env: TestEnv;
let shop: Shop;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  shop = await createShop(env, "Status identity shop", { templates: true });
});
afterAll(() => env.close());

const contactOf = (id: string) =>
  env.deps.db.selectFrom("contacts").selectAll().where("id", "=", id).executeTakeFirstOrThrow();

const messageOf = (id: string) =>
  env.deps.db.selectFrom("messages").selectAll().where("id", "=", id).executeTakeFirstOrThrow();

/** The row version of a contact: an UPDATE changes xmin, a row lock (FOR UPDATE) xmax. */
async function versionOf(contactId: string): Promise<string> {
  const { rows } = await sql<{ version: string }>`
    SELECT xmin::text || '/' || xmax::text AS version FROM contacts WHERE id = ${contactId}`.execute(
    env.deps.db,
  );
  return rows[0]!.version;
}

/** contact.merged events of the shop, pending or sequenced. */
async function mergedEvents(): Promise<{ contact_id: string | null; data: unknown }[]> {
  await sequenceFeed(env.deps.db);
  return env.deps.db
    .selectFrom("events")
    .select(["contact_id", "data"])
    .where("tenant_id", "=", shop.tenantId)
    .where("type", "=", "contact.merged")
    .execute();
}

/** A template to `to` (a phone) accepted by POST /messages; its message id. */
async function accept(to: string): Promise<string> {
  const response = await call(env.app, "POST", "/v2/messages", {
    token: shop.token,
    body: { to, template: ORDER_SHIPPED },
  });
  expect({ status: response.status, body: response.body }).toMatchObject({ status: 201 });
  return (response.body as { id: string }).id;
}

/** A template to `to` (a phone) through POST /messages and the send path; its message id. */
async function sendTo(to: string): Promise<string> {
  const id = await accept(to);
  expect(await deliverOne(env.deps, id)).toBe("sent");
  return id;
}

/** Until the simulator's statuses took the message to `read` (a drain applies any that overtook it). */
async function untilRead(messageId: string): Promise<void> {
  await eventually(async () => {
    await drainStatusEvents(env.deps.db, env.clock);
    return (await messageOf(messageId)).status === "read";
  });
}

describe("statuses attach the recipient's BSUID to the message's contact (DESIGN §14)", () => {
  test("a send by phone to a new number: its status's recipient_user_id goes to the contact", async () => {
    const phone = freshPhone();
    const messageId = await sendTo(phone);
    const contactId = (await messageOf(messageId)).contact_id;
    await untilRead(messageId);
    expect(await contactOf(contactId)).toMatchObject({
      phone,
      user_id: bsuidForPhone(phone.slice(1)),
      merged_into: null,
    });
    // Lookups by the BSUID find it now.
    const found = await call(env.app, "GET", `/v2/contacts?user_id=${bsuidForPhone(phone.slice(1))}`, {
      token: shop.token,
    });
    expect(found.status).toBe(200);
    expect(JSON.stringify(found.body)).toContain(contactId);
  });

  test("a send by phone to someone known by BSUID only: the status proves them one person, merged", async () => {
    const phone = freshPhone();
    const userId = bsuidForPhone(phone.slice(1));
    // The user writes with the number withheld: contact B, known by BSUID alone.
    const wrote = await customerWrites(env, shop.phoneNumberId, {
      from: phone.slice(1),
      hide_phone: true,
      type: "text",
      text: "hi, number hidden",
    });
    await finalizePendingInbound(env.deps.db, env.clock);
    const inbound = await env.deps.db
      .selectFrom("messages")
      .select("contact_id")
      .where("provider_message_id", "=", wrote)
      .executeTakeFirstOrThrow();
    const older = inbound.contact_id;
    expect(await contactOf(older)).toMatchObject({ phone: null, user_id: userId });
    const before = (await mergedEvents()).length;
    await Bun.sleep(5);

    // A send by phone: contact A, known by phone alone. The user hides the phone, so its statuses
    // carry only recipient_user_id.
    const messageId = await sendTo(phone);
    const younger = (await messageOf(messageId)).contact_id;
    expect(younger).not.toBe(older);
    await untilRead(messageId);

    expect(await contactOf(younger)).toMatchObject({ merged_into: older, phone: null, user_id: null });
    expect(await contactOf(older)).toMatchObject({ phone, user_id: userId, merged_into: null });
    expect(await messageOf(messageId)).toMatchObject({ contact_id: older, status: "read" });
    const merged = (await mergedEvents()).slice(before);
    expect(merged).toEqual([{ contact_id: older, data: { merged: [younger] } }]);
    // The message's status events went on (delivered, read), rendered with the survivor.
    const events = await call(env.app, "GET", "/v2/events?types=message.read", { token: shop.token });
    const read = (events.body as { data: { data: { id: string; contact: { id: string } } }[] }).data.find(
      (e) => e.data.id === messageId,
    );
    expect(read?.data.contact.id).toBe(older);
  });

  test("the common case writes nothing: a contact that carries the BSUID is left as it is", async () => {
    const phone = freshPhone();
    const first = await sendTo(phone);
    const contactId = (await messageOf(first)).contact_id;
    await untilRead(first);
    expect((await contactOf(contactId)).user_id).toBe(bsuidForPhone(phone.slice(1)));

    const merges = (await mergedEvents()).length;
    const second = await accept(phone);
    expect((await messageOf(second)).contact_id).toBe(contactId);
    // After the send's accept (which touches its contact), before any of its statuses.
    const version = await versionOf(contactId);
    expect(await deliverOne(env.deps, second)).toBe("sent");
    await untilRead(second);
    // sent, delivered and read all named the BSUID the contact carries: no lock, no UPDATE, no event.
    expect(await versionOf(contactId)).toBe(version);
    expect((await mergedEvents()).length).toBe(merges);
  });

  test("a status that overtook its send keeps its recipient: the drain attaches it", async () => {
    const phone = freshPhone();
    const userId = "DE.4400112233445566";
    const wamid = `wamid.overtaking-${crypto.randomUUID()}`;
    const posted = await postWebhook(
      env,
      buildWebhook(shop.account, {
        statuses: [
          {
            id: wamid,
            status: "delivered",
            timestamp: String(Math.floor(Date.now() / 1000)),
            recipient_user_id: userId,
          },
        ],
      }),
    );
    expect(posted.status).toBe(200);
    expect(await statusEventsOf(env.deps.db, wamid)).toMatchObject([{ recipient_user_id: userId }]);

    // The send's answer is recorded only now (as by the send worker).
    const messageId = await storeMessage(env.deps.db, {
      tenantId: shop.tenantId,
      senderId: shop.sender.id,
      phone,
      providerMessageId: wamid,
    });
    const contactId = (await messageOf(messageId)).contact_id;
    expect((await contactOf(contactId)).user_id).toBeNull();
    await drainStatusEvents(env.deps.db, env.clock);
    expect(await messageOf(messageId)).toMatchObject({ status: "delivered", contact_id: contactId });
    expect(await contactOf(contactId)).toMatchObject({ phone, user_id: userId });
  });
});
