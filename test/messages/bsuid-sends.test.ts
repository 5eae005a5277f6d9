/**
 * Issue 43 (DESIGN §14): `to` takes a phone number or a business-scoped user id (BSUID); a contact
 * without a phone is reached through `recipient`; authentication templates need a phone (409
 * recipient_phone_required). Single sends, batch items and scheduled sends alike.
 */
import { describe, expect, test } from "bun:test";
import { finalizeInbound } from "../../src/inbound/finalize.ts";
import { releaseDueMessages } from "../../src/outbound/scheduler.ts";
import { ORDER_SHIPPED, postMessage, sentTo } from "../support/fixtures.ts";
import { call, deliverOne, expectApiError } from "../support/index.ts";
import { useWorld } from "../support/world.ts";

const world = useWorld({ env: { simulator: true, statusDelayMs: 600_000 }, shop: { templates: true } });

const send = (body: Record<string, unknown>) => postMessage(world.env.app, world.shop.token, body);
const batch = (messages: unknown[]) =>
  call(world.env.app, "POST", "/v2/messages/batch", { token: world.shop.token, body: { messages } });
const nowS = () => Math.floor(world.env.clock.now().getTime() / 1000);
const LOGIN_CODE = { name: "login_code", language: "en", variables: { body: ["123456"] } };

/** What the simulator took for our message: one send, its Graph body. */
async function delivered(messageId: string) {
  expect(await deliverOne(world.env.deps, messageId)).toBe("sent");
  const sends = await sentTo(world.env, world.shop.sender.provider_phone_number_id, messageId);
  expect(sends).toHaveLength(1);
  return sends[0]!.payload;
}

/** A customer who hides their phone number writes (the simulator's `hide_phone`): their contact's id. */
async function phonelessCustomerWrites(userId: string, username?: string): Promise<string> {
  const response = await fetch(`${world.env.simulatorUrl}/_sim/inbound`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      phone_number_id: world.shop.sender.provider_phone_number_id,
      // Their number is withheld (a new number each, as two users never share one).
      from: `49151009${userId.slice(-5)}`,
      user_id: userId,
      username,
      hide_phone: true,
      type: "text",
      text: "hello, no number here",
    }),
  });
  const sent = (await response.json()) as { id: string; webhook_status: number };
  expect({ status: response.status, webhook: sent.webhook_status }).toEqual({ status: 200, webhook: 200 });
  const outcome = await finalizeInbound(world.env.deps.db, world.env.clock, sent.id);
  if (!outcome) throw new Error("the phone-less inbound was not stored");
  const row = await world.env.deps.db
    .selectFrom("messages")
    .select("contact_id")
    .where("id", "=", outcome.messageId)
    .executeTakeFirstOrThrow();
  return row.contact_id;
}

const contactRow = (id: string) =>
  world.env.deps.db.selectFrom("contacts").selectAll().where("id", "=", id).executeTakeFirstOrThrow();

describe("to: a BSUID", () => {
  test("a template to a BSUID nobody has yet: accepted, a contact known by it alone, sent by recipient", async () => {
    const accepted = await send({ to: "DE.2000000000001", template: ORDER_SHIPPED });
    expect(accepted.status).toBe(201);
    expect(accepted.body.to).toEqual({ object: "contact", id: expect.stringMatching(/^ctc_/), phone: null });
    expect(await contactRow(accepted.body.to.id)).toMatchObject({ phone: null, user_id: "DE.2000000000001" });
    const payload = await delivered(accepted.body.id);
    expect(payload.recipient).toBe("DE.2000000000001");
    expect(payload.to).toBeUndefined();
    // The next send to it finds the same contact.
    const again = await send({ to: "DE.2000000000001", template: ORDER_SHIPPED });
    expect(again.body.to.id).toBe(accepted.body.to.id);
    await delivered(again.body.id);
  });

  test("a phone-less customer who wrote: free text by their BSUID or their contact id, sent by recipient", async () => {
    const contactId = await phonelessCustomerWrites("DE.2000000000002", "jonas.k");
    for (const recipient of [{ to: "DE.2000000000002" }, { contact: contactId }]) {
      const accepted = await send({ ...recipient, body: "Your parcel arrives today." });
      expect(accepted.status).toBe(201);
      expect(accepted.body.to).toEqual({ object: "contact", id: contactId, phone: null });
      const payload = await delivered(accepted.body.id);
      expect(payload.recipient).toBe("DE.2000000000002");
      expect(payload.to).toBeUndefined();
    }
  });

  test("the BSUID of a contact with a phone: addressed by phone, as before", async () => {
    const accepted = await send({ to: "+4915100200003", template: ORDER_SHIPPED });
    const contactId: string = accepted.body.to.id;
    // Sends to one contact go out in order: this one first.
    await delivered(accepted.body.id);
    await world.env.deps.db
      .updateTable("contacts")
      .set({ user_id: "DE.2000000000003" })
      .where("id", "=", contactId)
      .execute();
    const byUserId = await send({ to: "DE.2000000000003", template: ORDER_SHIPPED });
    expect(byUserId.status).toBe(201);
    expect(byUserId.body.to).toEqual({ object: "contact", id: contactId, phone: "+4915100200003" });
    const payload = await delivered(byUserId.body.id);
    expect(payload.to).toBe("4915100200003");
    expect(payload.recipient).toBeUndefined();
  });

  test("batch items and scheduled sends take a BSUID too", async () => {
    const answer = await batch([
      { to: "DE.2000000000004", template: ORDER_SHIPPED },
      { to: "+4915100200004", template: ORDER_SHIPPED },
      { to: "DE-2000000000004", template: ORDER_SHIPPED },
    ]);
    expect(answer.status).toBe(200);
    const rows = answer.body.data;
    expect(rows.map((r: { status: number }) => r.status)).toEqual([201, 201, 400]);
    expect(rows[2].error).toMatchObject({ code: "parameter_invalid", param: "to" });
    expect((await delivered(rows[0].message.id)).recipient).toBe("DE.2000000000004");
    expect((await delivered(rows[1].message.id)).to).toBe("4915100200004");

    const at = nowS() + 120;
    const scheduled = await send({ to: "DE.2000000000005", template: ORDER_SHIPPED, send_at: at });
    expect(scheduled.status).toBe(201);
    expect(scheduled.body).toMatchObject({ status: "scheduled", to: { phone: null } });
    world.env.clock.advance(120);
    expect(await releaseDueMessages(world.env.deps)).toBeGreaterThanOrEqual(1);
    expect((await delivered(scheduled.body.id)).recipient).toBe("DE.2000000000005");
  });

  test("anything else is 400 parameter_invalid, param to, naming both forms", async () => {
    for (const to of [
      "de.2000000000006",
      "DE2000000000006",
      "DE.",
      "DE.20-00",
      "DEU.1",
      "jonas.k",
      "+12",
      "",
    ]) {
      const refused = await send({ to, template: ORDER_SHIPPED });
      expectApiError(refused, 400, "parameter_invalid", "to");
      expect(refused.body.error.message).toContain("E.164");
      expect(refused.body.error.message).toContain("DE.1502576394655843");
    }
  });
});

describe("authentication templates need a phone", () => {
  test("to a contact without a phone: 409 recipient_phone_required (to or contact); nothing stored", async () => {
    const contactId = await phonelessCustomerWrites("DE.2000000000007");
    const count = async () =>
      Number(
        (
          await world.env.deps.db
            .selectFrom("messages")
            .select((eb) => eb.fn.countAll().as("n"))
            .where("contact_id", "=", contactId)
            .executeTakeFirstOrThrow()
        ).n,
      );
    const before = await count();
    expectApiError(
      await send({ to: "DE.2000000000007", template: LOGIN_CODE }),
      409,
      "recipient_phone_required",
      "to",
    );
    expectApiError(
      await send({ contact: contactId, template: LOGIN_CODE }),
      409,
      "recipient_phone_required",
      "contact",
    );
    // A BSUID nobody has yet has no phone either.
    expectApiError(
      await send({ to: "DE.2000000000008", template: LOGIN_CODE }),
      409,
      "recipient_phone_required",
      "to",
    );
    expect(await count()).toBe(before);
    // Other templates still reach them.
    expect((await send({ contact: contactId, template: ORDER_SHIPPED })).status).toBe(201);
  });

  test("to a phone number: accepted and sent, as before", async () => {
    const accepted = await send({ to: "+4915100200009", template: LOGIN_CODE });
    expect(accepted.status).toBe(201);
    expect((await delivered(accepted.body.id)).to).toBe("4915100200009");
  });
});

describe("/v2/docs", () => {
  test("has the section on customers without a phone number and the new code's anchor", async () => {
    const docs = await call(world.env.app, "GET", "/v2/docs");
    expect(docs.status).toBe(200);
    expect(docs.text).toContain(
      '<h2 id="customers-without-a-phone-number">Customers without a phone number</h2>',
    );
    expect(docs.text).toContain('<section id="recipient_phone_required">');
    expect(docs.text).toContain('<a href="#customers-without-a-phone-number">');
  });
});
