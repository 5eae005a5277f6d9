/**
 * Issue 23 (DESIGN §13): POST /v2/messages/batch, per-item validation, idempotency and results, one
 * rate unit per call, the daily quota per item; and opt-out refusing a send at acceptance.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { deliverBatch } from "../../src/outbound/send.ts";
import { createShop, ORDER_SHIPPED, postMessage, simulatorSends } from "../support/fixtures.ts";
import { call, createTestEnv, nextSecond, type TestEnv } from "../support/index.ts";

let env: TestEnv;
let token: string;
let tenantId: string;
const PHONE_NUMBER_ID = "301000000000124";

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, statusDelayMs: 600_000 });
  ({ tenantId, token } = await createShop(env, "Acme", { phoneNumberId: PHONE_NUMBER_ID, templates: true }));
});
afterAll(() => env.close());

const batch = (messages: unknown[], as = token, headers?: Record<string, string>) =>
  call(env.app, "POST", "/v2/messages/batch", { token: as, body: { messages }, headers });

const countMessages = async (tenant = tenantId) =>
  Number(
    (
      await env.deps.db
        .selectFrom("messages")
        .select((eb) => eb.fn.countAll().as("n"))
        .where("tenant_id", "=", tenant)
        .where("direction", "=", "outbound")
        .executeTakeFirstOrThrow()
    ).n,
  );

/** A single send of the order-shipped template under an Idempotency-Key. */
const sendWithKey = (to: string, key: string) =>
  postMessage(env.app, token, { to, template: ORDER_SHIPPED }, { key });

/** Opts a contact out at `at`, or back in with null. */
const setOptedOut = (contactId: string, at: Date | null) =>
  env.deps.db.updateTable("contacts").set({ opted_out_at: at }).where("id", "=", contactId).execute();

describe("POST /v2/messages/batch", () => {
  test("bad items among good ones: exactly the good ones accepted, each error with its item's param", async () => {
    const before = await countMessages();
    const answer = await batch([
      { to: "+4915100124001", template: ORDER_SHIPPED, client_reference: "a" },
      { to: "+4915100124002", template: { ...ORDER_SHIPPED, name: "no_such_template" } },
      { template: ORDER_SHIPPED },
      "not an object",
      { to: "+4915100124003", template: ORDER_SHIPPED, colour: "red" },
      { to: "+4915100124004", template: ORDER_SHIPPED, idempotency_key: "bad key\u0001" },
      { to: "+4915100124005", template: ORDER_SHIPPED, client_reference: "b" },
    ]);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ object: "list", url: "/v2/messages/batch", has_more: false });
    const rows = answer.body.data;
    expect(rows.map((r: { index: number }) => r.index)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(rows.map((r: { status: number }) => r.status)).toEqual([201, 400, 400, 400, 400, 400, 201]);
    expect(rows[0]).toMatchObject({
      object: "batch_result",
      message: { object: "message", status: "accepted", client_reference: "a" },
      error: null,
    });
    expect(rows[1]).toMatchObject({
      message: null,
      error: { code: "template_not_found", param: "template.name" },
    });
    expect(rows[2].error).toMatchObject({ code: "parameter_missing", param: "to" });
    expect(rows[3].error.code).toBe("parameter_invalid");
    expect(rows[4].error).toMatchObject({ code: "parameter_unknown", param: "colour" });
    expect(rows[5].error).toMatchObject({ code: "parameter_invalid", param: "idempotency_key" });
    expect(rows[1].error.request_id).toBe(answer.headers.get("request-id"));
    expect(answer.headers.get("content-type")).toContain("application/json");
    expect(answer.headers.get("ratelimit-limit")).toBe("1000");
    expect(await countMessages()).toBe(before + 2);
  });

  test("a replayed batch sends nothing twice; a key repeated within a batch is a retry of the earlier item", async () => {
    const items = [1, 2, 3].map((n) => ({
      to: `+491510012401${n}`,
      template: ORDER_SHIPPED,
      idempotency_key: `batch-replay-${n}`,
    }));
    const first = await batch(items);
    expect(first.body.data.map((r: { status: number }) => r.status)).toEqual([201, 201, 201]);
    const before = await countMessages();
    const again = await batch(items);
    expect(again.body.data.map((r: { status: number }) => r.status)).toEqual([200, 200, 200]);
    expect(again.body.data.map((r: { message: { id: string } }) => r.message.id)).toEqual(
      first.body.data.map((r: { message: { id: string } }) => r.message.id),
    );
    expect(await countMessages()).toBe(before);

    // Shares the namespace of single sends' Idempotency-Key header.
    const single = await sendWithKey("+4915100124011", "batch-replay-1");
    expect(single.status).toBe(200);
    expect(single.body.id).toBe(first.body.data[0].message.id);

    const twice = await batch([
      { to: "+4915100124021", template: ORDER_SHIPPED, idempotency_key: "dup-in-batch" },
      { to: "+4915100124021", template: ORDER_SHIPPED, idempotency_key: "dup-in-batch" },
      { to: "+4915100124022", template: ORDER_SHIPPED, idempotency_key: "dup-in-batch" },
    ]);
    expect(twice.body.data.map((r: { status: number }) => r.status)).toEqual([201, 200, 400]);
    expect(twice.body.data[1].message.id).toBe(twice.body.data[0].message.id);
    expect(twice.body.data[2].error).toMatchObject({
      code: "idempotency_key_reused",
      param: "idempotency_key",
    });
  });

  test("whole-call refusals: an Idempotency-Key header, no items, more than 1,000, not a list", async () => {
    const withHeader = await batch([{ to: "+4915100124031", template: ORDER_SHIPPED }], token, {
      "idempotency-key": "k",
    });
    expect(withHeader.status).toBe(400);
    expect(withHeader.body.error).toMatchObject({ code: "parameter_invalid", param: "Idempotency-Key" });
    expect((await batch([])).status).toBe(400);
    const tooMany = Array.from({ length: 1001 }, () => ({ to: "+4915100124032", template: ORDER_SHIPPED }));
    expect((await batch(tooMany)).status).toBe(400);
    const notList = await call(env.app, "POST", "/v2/messages/batch", { token, body: { messages: {} } });
    expect(notList.status).toBe(400);
    expect(notList.body.error.param).toBe("messages");
  });

  test("one unit of the send limit per call, whatever its size", async () => {
    const { token: limited } = await createShop(env, "Limited", { sendLimit: 1, templates: true });
    await nextSecond();
    const items = Array.from({ length: 20 }, (_, n) => ({
      to: `+49151001241${n + 10}`,
      template: ORDER_SHIPPED,
    }));
    const first = await batch(items, limited);
    expect(first.status).toBe(200);
    expect(first.body.data.every((r: { status: number }) => r.status === 201)).toBe(true);
    const second = await batch(items, limited);
    expect(second.status).toBe(429);
    expect(second.body.error.code).toBe("rate_limit_exceeded");
  });

  test("the daily quota per accepted item; the items past it are the last ones, 429 quota_exceeded", async () => {
    const quota = await createShop(env, "Small", { dailyQuota: 5, templates: true });
    const items: unknown[] = Array.from({ length: 8 }, (_, n) => ({
      to: `+4915100124${200 + n}`,
      template: ORDER_SHIPPED,
    }));
    // A refused item spends no unit: the one after it takes it.
    items[1] = { to: "+4915100124299", template: { ...ORDER_SHIPPED, name: "nope" } };
    const answer = await batch(items, quota.token);
    expect(answer.body.data.map((r: { status: number }) => r.status)).toEqual([
      201, 400, 201, 201, 201, 201, 429, 429,
    ]);
    expect(answer.body.data[7].error.code).toBe("quota_exceeded");
    expect(await countMessages(quota.tenantId)).toBe(5);
  });

  test("items to one contact are handed to the provider in item order", async () => {
    const items = ["first", "second", "third"].map((ref) => ({
      to: "+4915100124301",
      template: ORDER_SHIPPED,
      client_reference: ref,
    }));
    const answer = await batch(items);
    const ids: string[] = answer.body.data.map((r: { message: { id: string } }) => r.message.id);
    // Named in reverse: the worker still sends them in item order.
    await deliverBatch(env.deps, [...ids].reverse());
    const order = (await simulatorSends(env, PHONE_NUMBER_ID))
      .map((send) => send.payload.biz_opaque_callback_data ?? "")
      .filter((id) => ids.includes(id));
    expect(order).toEqual(ids);
  });
});

describe("opt-out at acceptance", () => {
  test("a send to an opted-out contact is 409 recipient_opted_out, by phone, by contact and in a batch", async () => {
    const accepted = await postMessage(env.app, token, { to: "+4915100124401", template: ORDER_SHIPPED });
    const contactId: string = accepted.body.to.id;
    await setOptedOut(contactId, new Date());
    const before = await countMessages();
    const byPhone = await sendWithKey("+4915100124401", "opted-out-1");
    expect(byPhone.status).toBe(409);
    expect(byPhone.body.error).toMatchObject({ code: "recipient_opted_out", param: "to" });
    const byContact = await postMessage(env.app, token, { contact: contactId, body: "hello" });
    expect(byContact.status).toBe(409);
    expect(byContact.body.error).toMatchObject({ code: "recipient_opted_out", param: "contact" });
    const inBatch = await batch([
      { to: "+4915100124401", template: ORDER_SHIPPED },
      { to: "+4915100124402", template: ORDER_SHIPPED },
    ]);
    expect(inBatch.body.data.map((r: { status: number }) => r.status)).toEqual([409, 201]);
    expect(await countMessages()).toBe(before + 1);
    // The refused key was not kept: after opting in, the same key sends.
    await setOptedOut(contactId, null);
    const later = await sendWithKey("+4915100124401", "opted-out-1");
    expect(later.status).toBe(201);
  });

  test("accepted before the opt-out: fails at the claim with recipient_opted_out, nothing sent", async () => {
    const accepted = await postMessage(env.app, token, { to: "+4915100124403", template: ORDER_SHIPPED });
    await setOptedOut(accepted.body.to.id, new Date());
    const report = await deliverBatch(env.deps, [accepted.body.id]);
    expect(report.outcomes.get(accepted.body.id)).toBe("failed");
    const found = await call(env.app, "GET", `/v2/messages/${accepted.body.id}`, { token });
    expect(found.body).toMatchObject({ status: "failed", failure: { code: "recipient_opted_out" } });
  });
});
