/**
 * Issue 22, first part: the event log (DESIGN §12). Events are written by the statements that change
 * a message (the message writer, the send record, the status statement), numbered after commit by the
 * feed's sequencer, and read with GET /v2/events from an `evc_` cursor.
 */
import { describe, expect, test } from "bun:test";
import { buildWebhook, webhookTimestamp } from "../../src/channel/webhook-payloads.ts";
import { deleteExpired } from "../../src/db/batched-delete.ts";
import { EVENT_EXPIRY, EVENT_RETENTION_MS } from "../../src/events/repository.ts";
import { sequenceFeed } from "../../src/feed/sequencer.ts";
import { finalizePendingInbound } from "../../src/inbound/finalize.ts";
import { ORDER_SHIPPED, postMessage } from "../support/fixtures.ts";
import { type CallResult, call, deliverOne, postWebhook } from "../support/index.ts";
import { useWorld } from "../support/world.ts";

// The simulator's own statuses never come within a test: the test posts them.
const world = useWorld({ env: { simulator: true, statusDelayMs: 600_000 }, shop: { templates: true } });

async function sendOne(to: string): Promise<{ id: string; providerId: string }> {
  const accepted = await postMessage(world.env.app, world.shop.token, { to, template: ORDER_SHIPPED });
  expect(accepted.status).toBe(201);
  await deliverOne(world.env.deps, accepted.body.id);
  const row = await world.env.deps.db
    .selectFrom("messages")
    .select("provider_message_id")
    .where("id", "=", accepted.body.id)
    .executeTakeFirstOrThrow();
  return { id: accepted.body.id, providerId: row.provider_message_id ?? "" };
}

function statuses(providerId: string, list: ("sent" | "delivered" | "read")[]) {
  const at = Number(webhookTimestamp());
  return postWebhook(
    world.env,
    buildWebhook(world.shop.account, {
      statuses: list.map((status, i) => ({
        id: providerId,
        status,
        timestamp: String(at + i),
        recipient_id: "4915100000555",
      })),
    }),
  );
}

/** Every event of the tenant from the start, the sequencer having run first. */
async function allEvents(query = ""): Promise<CallResult> {
  await sequenceFeed(world.env.deps.db);
  return call(world.env.app, "GET", `/v2/events${query}`, { token: world.shop.token });
}

const eventsOf = (page: CallResult, messageId: string) =>
  (page.body.data as { type: string; data: { id: string; status: string | null } }[]).filter(
    (event) => event.data.id === messageId,
  );

describe("the event log", () => {
  test("an outbound message: sent (the provider took it), delivered, read, each with the status it left", async () => {
    const { id, providerId } = await sendOne("+4915100000551");
    expect((await statuses(providerId, ["sent"])).status).toBe(200);
    expect((await statuses(providerId, ["delivered"])).status).toBe(200);
    expect((await statuses(providerId, ["read"])).status).toBe(200);
    // A repeat of an applied status moves nothing: no event.
    expect((await statuses(providerId, ["delivered"])).status).toBe(200);
    const page = await allEvents();
    expect(page.status).toBe(200);
    const events = eventsOf(page, id);
    expect(events.map((e) => [e.type, e.data.status])).toEqual([
      ["message.sent", "sent"],
      ["message.delivered", "delivered"],
      ["message.read", "read"],
    ]);
    const first = page.body.data[0];
    expect(first).toMatchObject({
      object: "event",
      id: expect.stringMatching(/^evt_[0-9a-f]{32}$/),
      created: expect.any(Number),
      data: {
        object: "message",
        direction: "outbound",
        contact: { object: "contact", phone: "+4915100000551" },
      },
    });
    expect(page.body.next_cursor).toMatch(/^evc_/);
  });

  test("statuses applied together emit one event each, in order; a skipped status emits none", async () => {
    const together = await sendOne("+4915100000552");
    expect((await statuses(together.providerId, ["delivered", "read"])).status).toBe(200);
    const skipping = await sendOne("+4915100000554");
    expect((await statuses(skipping.providerId, ["read"])).status).toBe(200);
    const page = await allEvents("?limit=500");
    expect(eventsOf(page, together.id).map((e) => e.type)).toEqual([
      "message.sent",
      "message.delivered",
      "message.read",
    ]);
    expect(eventsOf(page, skipping.id).map((e) => e.type)).toEqual(["message.sent", "message.read"]);
  });

  test("a customer's message: message.received; a system notice: nothing", async () => {
    const response = await postWebhook(
      world.env,
      buildWebhook(world.shop.account, {
        contacts: [{ profile: { name: "Ana" }, wa_id: "4915100000553" }],
        messages: [
          {
            from: "4915100000553",
            id: "wamid.events-inbound-1",
            timestamp: webhookTimestamp(),
            type: "text",
            text: { body: "hello" },
          },
          {
            from: "4915100000553",
            id: "wamid.events-system-1",
            timestamp: webhookTimestamp(),
            type: "system",
            system: { body: "changed number", type: "user_changed_number" },
          },
        ],
      }),
    );
    expect(response.status).toBe(200);
    await finalizePendingInbound(world.env.deps.db, world.env.clock);
    const page = await allEvents("?types=message.received");
    expect(page.body.data).toHaveLength(1);
    expect(page.body.data[0]).toMatchObject({
      type: "message.received",
      data: { direction: "inbound", text: "hello", status: null },
    });
  });

  test("a send that fails for good: message.failed with the failure", async () => {
    const accepted = await call(world.env.app, "POST", "/v2/messages", {
      token: world.shop.token,
      // A sandbox recipient the simulator fails with Graph error 190 (provider_auth_failed).
      body: { to: "+15550001006", template: ORDER_SHIPPED },
    });
    expect(await deliverOne(world.env.deps, accepted.body.id)).toBe("failed");
    const events = (await allEvents("?types=message.failed")).body.data;
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      data: { id: accepted.body.id, status: "failed", failure: { code: "provider_auth_failed" } },
    });
  });
});

describe("GET /events", () => {
  test("pages chain with next_cursor, without gaps or repeats; an empty page keeps its cursor", async () => {
    const whole = (await allEvents("?limit=500")).body.data.map((e: { id: string }) => e.id);
    expect(whole.length).toBeGreaterThan(3);
    const seen: string[] = [];
    let cursor: string | undefined;
    for (;;) {
      const page = await call(world.env.app, "GET", `/v2/events?limit=2${cursor ? `&since=${cursor}` : ""}`, {
        token: world.shop.token,
      });
      seen.push(...page.body.data.map((e: { id: string }) => e.id));
      if (!page.body.has_more) {
        const empty = await call(world.env.app, "GET", `/v2/events?since=${page.body.next_cursor}`, {
          token: world.shop.token,
        });
        expect(empty.body.data).toEqual([]);
        expect(empty.body.next_cursor).toBe(page.body.next_cursor);
        break;
      }
      cursor = page.body.next_cursor;
    }
    expect(seen).toEqual(whole);
  });

  test("a cursor that is garbage, a feed cursor or another tenant's: 400 param since; a bad type: 400 param types", async () => {
    const mine = (await allEvents()).body.next_cursor;
    const feed = (await call(world.env.app, "GET", "/v2/messages", { token: world.shop.token })).body
      .next_cursor;
    for (const [since, who] of [
      ["evc_nonsense", world.shop.token],
      [feed, world.shop.token],
      [mine, world.other.token],
    ] as const) {
      const response = await call(world.env.app, "GET", `/v2/events?since=${since}`, { token: who });
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({ code: "parameter_invalid", param: "since" });
    }
    const badType = await call(world.env.app, "GET", "/v2/events?types=message.sent,message.bounced", {
      token: world.shop.token,
    });
    expect(badType.status).toBe(400);
    expect(badType.body.error).toMatchObject({ code: "parameter_invalid", param: "types" });
    // Another tenant sees none of these events.
    expect((await call(world.env.app, "GET", "/v2/events", { token: world.other.token })).body.data).toEqual(
      [],
    );
  });

  test("events older than 30 days go", async () => {
    const before = (await allEvents("?limit=500")).body.data.length;
    await world.env.deps.db
      .updateTable("events")
      .set({ created_at: new Date(Date.now() - EVENT_RETENTION_MS - 60_000) })
      .where("tenant_id", "=", world.shop.tenantId)
      .where("type", "=", "message.received")
      .execute();
    expect(await deleteExpired(world.env.deps.db, new Date(), EVENT_EXPIRY)).toBe(1);
    expect((await allEvents("?limit=500")).body.data.length).toBe(before - 1);
  });
});
