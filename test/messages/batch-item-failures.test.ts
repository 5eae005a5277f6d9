/**
 * Issue 42, item 4 (DESIGN §13 Details): an item of POST /v2/messages/batch that fails unexpectedly
 * gets its own row (500 `internal_error`), the others keep theirs and the call answers 200; the
 * daily quota is given back only for items not stored. And the trigger seen in production: a
 * replayed Idempotency-Key whose message the tenant's retention had already removed.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import { CHANNEL } from "../../src/channel/provider.ts";
import { utcDay } from "../../src/clock.ts";
import { applyMessageRetention } from "../../src/maintenance/retention.ts";
import { idempotencyRedisKey } from "../../src/messages/idempotency.ts";
import { deliverBatch } from "../../src/outbound/send.ts";
import { createShop, ORDER_SHIPPED, postMessage, type Shop, sentTo } from "../support/fixtures.ts";
import { call, createTestEnv, type TestEnv } from "../support/index.ts";

let env: TestEnv;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, statusDelayMs: 600_000 });
});
afterAll(() => env.close());

const batch = (shop: Shop, messages: unknown[]) =>
  call(env.app, "POST", "/v2/messages/batch", { token: shop.token, body: { messages } });

/** The tenant's quota counter for today, as the admission keeps it in Redis. */
async function quotaUsed(shop: Shop): Promise<number> {
  const key = env.deps.keys.dailyQuota(shop.tenantId, CHANNEL, utcDay(env.clock.now()).key);
  return Number((await env.deps.redis.get(key)) ?? 0);
}

async function storedMessages(shop: Shop): Promise<number> {
  const row = await env.deps.db
    .selectFrom("messages")
    .select((eb) => eb.fn.countAll().as("n"))
    .where("tenant_id", "=", shop.tenantId)
    .where("direction", "=", "outbound")
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** The rows' messages reach the provider (the send worker's delivery, over HTTP to the simulator). */
async function expectSendable(shop: Shop, ids: string[]) {
  await deliverBatch(env.deps, ids);
  for (const id of ids) expect(await sentTo(env, shop.phoneNumberId, id)).toHaveLength(1);
}

/**
 * A send under `key`, delivered, then removed by the tenant's retention as the maintenance worker
 * removes it: a retention of a minute, shorter than the key's 24 hours (set in SQL: the CLI refuses
 * less than 2 days), and the clock two minutes on.
 */
async function sendThenRetain(shop: Shop, key: string, item: Record<string, unknown>): Promise<string> {
  const first = await postMessage(env.app, shop.token, item, { key });
  expect(first.status).toBe(201);
  await deliverBatch(env.deps, [first.body.id]);
  await env.deps.db
    .updateTable("tenants")
    .set({ message_retention_days: 1 / 1440 })
    .where("id", "=", shop.tenantId)
    .execute();
  env.clock.advance(120);
  const removed = await applyMessageRetention(env.deps.db, env.clock.now());
  expect(removed.messages).toBeGreaterThanOrEqual(1);
  const left = await env.deps.db
    .selectFrom("messages")
    .select("id")
    .where("id", "=", first.body.id)
    .executeTakeFirst();
  expect(left).toBeUndefined();
  return first.body.id;
}

describe("a replayed Idempotency-Key whose message retention removed", () => {
  test("in a batch: its row is 404 resource_missing, the items around it are stored and sent, the quota counts them", async () => {
    const shop = await createShop(env, "Retained batch", { templates: true });
    const replayed = { to: "+4915100142001", template: ORDER_SHIPPED };
    const goneId = await sendThenRetain(shop, "retained-batch", replayed);
    const quotaBefore = await quotaUsed(shop);
    const storedBefore = await storedMessages(shop);

    const answer = await batch(shop, [
      { to: "+4915100142002", template: ORDER_SHIPPED, idempotency_key: "around-1" },
      { ...replayed, idempotency_key: "retained-batch" },
      { to: "+4915100142003", template: ORDER_SHIPPED },
    ]);
    expect(answer.status).toBe(200);
    const rows = answer.body.data;
    expect(rows.map((r: { status: number }) => r.status)).toEqual([201, 404, 201]);
    expect(rows[1]).toMatchObject({
      message: null,
      error: { type: "invalid_request_error", code: "resource_missing", param: "idempotency_key" },
    });
    expect(rows[1].error.message).toContain(goneId);
    expect(rows[1].error.message).toContain("retention");
    expect(rows[1].error.message).not.toContain("Idempotency-Key");

    // Exactly the two stored items spend the quota; the replay's unit is given back.
    expect(await storedMessages(shop)).toBe(storedBefore + 2);
    expect(await quotaUsed(shop)).toBe(quotaBefore + 2);
    await expectSendable(shop, [rows[0].message.id, rows[2].message.id]);
  });

  test("a single send answers 404 resource_missing (param Idempotency-Key) and sends nothing, with or without Redis's marker", async () => {
    const shop = await createShop(env, "Retained single", { templates: true });
    const item = { to: "+4915100142011", template: ORDER_SHIPPED };
    const goneId = await sendThenRetain(shop, "retained-single", item);
    const quotaBefore = await quotaUsed(shop);
    const storedBefore = await storedMessages(shop);

    const replay = await postMessage(env.app, shop.token, item, { key: "retained-single" });
    expect(replay.status).toBe(404);
    expect(replay.body.error).toMatchObject({ code: "resource_missing", param: "Idempotency-Key" });
    expect(replay.body.error.message).toContain(goneId);
    expect(replay.headers.get("idempotency-replayed")).toBeNull();

    // Redis lost the key's done marker: the durable record still decides, and says the same.
    const auth = {
      tenantId: shop.tenantId,
      clientId: shop.clientId,
      scopes: [],
      readLimit: 0,
      sendLimit: 0,
    } as Parameters<typeof idempotencyRedisKey>[1];
    await env.deps.redis.del(idempotencyRedisKey(env.deps.keys, auth, "retained-single"));
    const again = await postMessage(env.app, shop.token, item, { key: "retained-single" });
    expect(again.status).toBe(404);
    expect(again.body.error).toMatchObject({ code: "resource_missing", param: "Idempotency-Key" });

    expect(await storedMessages(shop)).toBe(storedBefore);
    expect(await quotaUsed(shop)).toBe(quotaBefore);
    // Another body under the spent key is still the body's mistake.
    const other = await postMessage(
      env.app,
      shop.token,
      { ...item, to: "+4915100142012" },
      { key: "retained-single" },
    );
    expect(other.status).toBe(400);
    expect(other.body.error.code).toBe("idempotency_key_reused");
  });
});

describe("an item that fails unexpectedly", () => {
  // An unforeseen failure of ours, for one item only: Postgres refuses its row (a constraint the
  // code knows nothing of), after the group commit has tried its batch and then each row alone.
  const UNFORESEEN = "unforeseen-failure";
  beforeAll(() =>
    env.deps.db.schema
      .alterTable("messages")
      .addCheckConstraint("test_unforeseen", sqlNot(UNFORESEEN))
      .execute(),
  );
  afterAll(() => env.deps.db.schema.alterTable("messages").dropConstraint("test_unforeseen").execute());

  test("gets its own row, 500 internal_error; the others are stored and sent, the call is 200, the quota counts the stored ones", async () => {
    const shop = await createShop(env, "Unforeseen", { templates: true });
    const quotaBefore = await quotaUsed(shop);
    const storedBefore = await storedMessages(shop);
    const failing = {
      to: "+4915100142022",
      template: ORDER_SHIPPED,
      client_reference: UNFORESEEN,
      idempotency_key: "unforeseen-1",
    };
    const answer = await batch(shop, [
      { to: "+4915100142021", template: ORDER_SHIPPED, idempotency_key: "before-it" },
      failing,
      // Same recipient: runs after the failing item, in item order.
      { to: "+4915100142022", template: ORDER_SHIPPED, client_reference: "after-it" },
      { to: "+4915100142023", template: { ...ORDER_SHIPPED, name: "no_such_template" } },
    ]);
    expect(answer.status).toBe(200);
    const rows = answer.body.data;
    expect(rows.map((r: { status: number }) => r.status)).toEqual([201, 500, 201, 400]);
    expect(rows[1]).toMatchObject({
      object: "batch_result",
      index: 1,
      message: null,
      error: {
        type: "api_error",
        code: "internal_error",
        param: null,
        request_id: answer.headers.get("request-id"),
      },
    });
    expect(rows[3].error.code).toBe("template_not_found");

    expect(await storedMessages(shop)).toBe(storedBefore + 2);
    expect(await quotaUsed(shop)).toBe(quotaBefore + 2);
    await expectSendable(shop, [rows[0].message.id, rows[2].message.id]);

    // Its key was given back: once the fault is gone, the same item is accepted.
    await env.deps.db.schema.alterTable("messages").dropConstraint("test_unforeseen").execute();
    await env.deps.db.schema
      .alterTable("messages")
      .addCheckConstraint("test_unforeseen", sqlNot("never-sent-by-this-test"))
      .execute();
    const retried = await batch(shop, [failing]);
    expect(retried.body.data[0].status).toBe(201);
    expect(await quotaUsed(shop)).toBe(quotaBefore + 3);
  });
});

/** A CHECK that refuses one client_reference. */
function sqlNot(reference: string) {
  return sql`client_reference IS DISTINCT FROM ${sql.lit(reference)}`;
}
