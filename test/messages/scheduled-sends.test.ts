/**
 * Issue 23 (DESIGN §13): `send_at` (status `scheduled`, durable in Postgres, into delivery at its
 * time), POST /messages/{id}/cancel decided at the send claim, and `valid_for` expiry at the claim.
 */
import { describe, expect, test } from "bun:test";
import { finalizeInbound } from "../../src/inbound/finalize.ts";
import { sweep } from "../../src/maintenance/sweeper.ts";
import { failExpiredMessages } from "../../src/outbound/expire.ts";
import { releaseDueMessages } from "../../src/outbound/scheduler.ts";
import {
  createShop,
  customerWrites,
  ORDER_SHIPPED,
  postMessage,
  sentTo,
  simulatorSends,
} from "../support/fixtures.ts";
import { call, deliverOne, eventually, getToken, spawnWorker } from "../support/index.ts";
import { useWorld } from "../support/world.ts";

// The simulator's own statuses never come within a test: the test posts them.
const world = useWorld({ env: { simulator: true, statusDelayMs: 600_000 }, shop: { templates: true } });

const send = (body: Record<string, unknown>, key?: string) =>
  postMessage(world.env.app, world.shop.token, body, { key });
const get = (id: string) => call(world.env.app, "GET", `/v2/messages/${id}`, { token: world.shop.token });
const cancel = (id: string, as = world.shop.token) =>
  call(world.env.app, "POST", `/v2/messages/${id}/cancel`, { token: as });
const nowS = () => Math.floor(world.env.clock.now().getTime() / 1000);

/** A customer's message, so that the contact's 24-hour window opens now (provider time). */
async function inbound(from: string, text = "hello"): Promise<void> {
  const id = await customerWrites(world.env, world.shop.sender.provider_phone_number_id, {
    from: from.slice(1),
    type: "text",
    text,
  });
  await finalizeInbound(world.env.deps.db, world.env.clock, id);
}

describe("send_at", () => {
  test("stored scheduled, invisible to the send worker until its time, then sent", async () => {
    const at = nowS() + 120;
    const accepted = await send({ to: "+4915100123001", template: ORDER_SHIPPED, send_at: at }, "sched-1");
    expect(accepted.status).toBe(201);
    expect(accepted.body).toMatchObject({ status: "scheduled", send_at: at, valid_for: null });
    const id: string = accepted.body.id;
    // A replay answers as the first request did.
    const replay = await send({ to: "+4915100123001", template: ORDER_SHIPPED, send_at: at }, "sched-1");
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(accepted.body);

    // Named by a job before its time, it is not sent; the scheduler leaves it.
    expect(await deliverOne(world.env.deps, id)).toBe("skipped");
    expect(await releaseDueMessages(world.env.deps)).toBe(0);
    expect((await get(id)).body.status).toBe("scheduled");
    // In history from its creation, with its current status.
    const history = await call(world.env.app, "GET", `/v2/contacts/${accepted.body.to.id}/messages`, {
      token: world.shop.token,
    });
    expect(history.body.data.find((m: { id: string }) => m.id === id).status).toBe("scheduled");

    world.env.clock.advance(120);
    expect(await releaseDueMessages(world.env.deps)).toBe(1);
    expect((await get(id)).body.status).toBe("accepted");
    expect(await deliverOne(world.env.deps, id)).toBe("sent");
    expect(await sentTo(world.env, world.shop.sender.provider_phone_number_id, id)).toHaveLength(1);
    expect((await get(id)).body).toMatchObject({ status: "sent", send_at: at });
    expect(await releaseDueMessages(world.env.deps)).toBe(0);
  });

  test("from now + 60 s to now + 30 days, both inclusive; else 400 parameter_invalid", async () => {
    const now = nowS();
    for (const ok of [now + 60, now + 30 * 86400]) {
      expect((await send({ to: "+4915100123002", template: ORDER_SHIPPED, send_at: ok })).status).toBe(201);
    }
    for (const bad of [now + 59, now + 30 * 86400 + 1, now - 10, 1.5, "soon"]) {
      const refused = await send({ to: "+4915100123002", template: ORDER_SHIPPED, send_at: bad });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ code: "parameter_invalid", param: "send_at" });
    }
  });

  test("free text needs the window open at send_at as known now, and again at that time", async () => {
    await inbound("+4915100123003");
    const refused = await send({
      contact: await contactOf("+4915100123003"),
      body: "hi",
      send_at: nowS() + 86400,
    });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "messaging_window_closed", param: "send_at" });

    const accepted = await send({
      contact: await contactOf("+4915100123003"),
      body: "see you at 10",
      send_at: nowS() + 3600,
    });
    expect(accepted.status).toBe(201);
    // Time passes beyond the window before the message is due (the clock jumps past both).
    const before = world.env.clock.now();
    world.env.clock.advance(25 * 3600);
    expect(await releaseDueMessages(world.env.deps)).toBeGreaterThanOrEqual(1);
    expect(await deliverOne(world.env.deps, accepted.body.id)).toBe("failed");
    world.env.clock.set(before);
    expect((await get(accepted.body.id)).body).toMatchObject({
      status: "failed",
      failure: { code: "messaging_window_closed", retryable: false },
    });
    expect(
      await sentTo(world.env, world.shop.sender.provider_phone_number_id, accepted.body.id),
    ).toHaveLength(0);
  });
});

async function contactOf(phone: string): Promise<string> {
  const row = await world.env.deps.db
    .selectFrom("contacts")
    .select("id")
    .where("phone", "=", phone)
    .executeTakeFirstOrThrow();
  return row.id;
}

describe("cancel", () => {
  test("a scheduled message: 200 canceled, again 200, never sent, logged as message.canceled", async () => {
    const accepted = await send({ to: "+4915100123010", template: ORDER_SHIPPED, send_at: nowS() + 60 });
    const id: string = accepted.body.id;
    const canceled = await cancel(id);
    expect(canceled.status).toBe(200);
    expect(canceled.body).toEqual({ ...accepted.body, status: "canceled" });
    expect((await cancel(id)).body.status).toBe("canceled");
    const before = world.env.clock.now();
    world.env.clock.advance(61);
    await releaseDueMessages(world.env.deps);
    expect(await deliverOne(world.env.deps, id)).toBe("skipped");
    world.env.clock.set(before);
    expect(await sentTo(world.env, world.shop.sender.provider_phone_number_id, id)).toHaveLength(0);
    expect((await get(id)).body.status).toBe("canceled");
    const events = await eventsOf(id);
    expect(events).toContain("message.canceled");
  });

  test("an accepted message not yet claimed: canceled, and its pair's next message goes out", async () => {
    const first = await send({ to: "+4915100123011", template: ORDER_SHIPPED });
    const second = await send({ to: "+4915100123011", template: ORDER_SHIPPED });
    // The second waits behind the first (one pair, in order).
    expect(await deliverOne(world.env.deps, second.body.id)).toBe("skipped");
    expect((await cancel(first.body.id)).status).toBe(200);
    expect(await deliverOne(world.env.deps, first.body.id)).toBe("skipped");
    expect(await deliverOne(world.env.deps, second.body.id)).toBe("sent");
    expect(await sentTo(world.env, world.shop.sender.provider_phone_number_id, first.body.id)).toHaveLength(
      0,
    );
  });

  test("once handed to the provider: 409 message_not_cancelable naming the status", async () => {
    const accepted = await send({ to: "+4915100123012", template: ORDER_SHIPPED });
    expect(await deliverOne(world.env.deps, accepted.body.id)).toBe("sent");
    const refused = await cancel(accepted.body.id);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("message_not_cancelable");
    expect(refused.body.error.message).toContain("sent");
  });

  test("a claimed message (send in progress) is not cancelable", async () => {
    const accepted = await send({ to: "+4915100123013", template: ORDER_SHIPPED });
    await world.env.deps.db
      .updateTable("messages")
      .set({ send_started_at: world.env.clock.now() })
      .where("id", "=", accepted.body.id)
      .execute();
    const refused = await cancel(accepted.body.id);
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain("accepted");
  });

  test("unknown, another tenant's or inbound: 404 or 409; a token without messaging:send: 403", async () => {
    const accepted = await send({ to: "+4915100123014", template: ORDER_SHIPPED, send_at: nowS() + 600 });
    expect((await cancel(accepted.body.id, world.other.token)).status).toBe(404);
    expect((await cancel("msg_nope")).status).toBe(404);
    expect((await get(accepted.body.id)).body.status).toBe("scheduled");
  });
});

async function eventsOf(id: string): Promise<string[]> {
  const { sequenceFeed } = await import("../../src/feed/sequencer.ts");
  await sequenceFeed(world.env.deps.db);
  const events = await call(world.env.app, "GET", "/v2/events?limit=500", { token: world.shop.token });
  return events.body.data
    .filter((e: { data: { id: string } }) => e.data.id === id)
    .map((e: { type: string }) => e.type);
}

describe("valid_for", () => {
  test("a message not handed over within valid_for fails expired and is never sent", async () => {
    const accepted = await send({ to: "+4915100123020", template: ORDER_SHIPPED, valid_for: 30 });
    expect(accepted.body.valid_for).toBe(30);
    const before = world.env.clock.now();
    world.env.clock.advance(31);
    expect(await deliverOne(world.env.deps, accepted.body.id)).toBe("failed");
    world.env.clock.set(before);
    expect((await get(accepted.body.id)).body).toMatchObject({
      status: "failed",
      valid_for: 30,
      failure: { code: "expired", retryable: false },
    });
    expect(
      await sentTo(world.env, world.shop.sender.provider_phone_number_id, accepted.body.id),
    ).toHaveLength(0);
  });

  test("counted from send_at when scheduled; in time it is sent", async () => {
    const accepted = await send({
      to: "+4915100123021",
      template: ORDER_SHIPPED,
      send_at: nowS() + 100,
      valid_for: 30,
    });
    const before = world.env.clock.now();
    world.env.clock.advance(120);
    await releaseDueMessages(world.env.deps);
    expect(await deliverOne(world.env.deps, accepted.body.id)).toBe("sent");
    world.env.clock.set(before);
  });

  test("one nobody claims (no send worker) is failed expired by the sweeper, with its event", async () => {
    const accepted = await send({ to: "+4915100123023", template: ORDER_SHIPPED, valid_for: 5 });
    const id: string = accepted.body.id;
    const before = world.env.clock.now();
    expect(await failExpiredMessages(world.env.deps)).toBe(0);
    world.env.clock.advance(6);
    expect((await sweep(world.env.deps, 3600)).expired).toBe(1);
    world.env.clock.set(before);
    expect((await get(id)).body).toMatchObject({ status: "failed", failure: { code: "expired" } });
    expect(await eventsOf(id)).toContain("message.failed");
    // The send worker then finds nothing to do.
    expect(await deliverOne(world.env.deps, id)).toBe("skipped");
    expect(await sentTo(world.env, world.shop.sender.provider_phone_number_id, id)).toHaveLength(0);
  });

  test("1 to 86,400 seconds", async () => {
    for (const bad of [0, 86401, -5, 2.5]) {
      const refused = await send({ to: "+4915100123022", template: ORDER_SHIPPED, valid_for: bad });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ code: "parameter_invalid", param: "valid_for" });
    }
  });
});

describe("cancel races the send claim (real send workers)", () => {
  test("1,000 cancels at the scheduled instant, 2 send workers: no 200-canceled message reaches the provider", async () => {
    const race = await createShop(world.env, "Race", {
      readLimit: 100_000,
      sendLimit: 100_000,
      mps: 1000,
      templates: true,
    });
    // The api's clock (manual) 58 s behind the workers' (real): send_at, at least now + 60 s for the
    // api, comes 2 s from now for the workers.
    const saved = world.env.clock.now();
    world.env.clock.set(new Date(Date.now() - 58_000));
    const racer = await getToken(world.env.app, race.clientId, race.clientSecret);
    const sendAt = nowS() + 60;
    const items = Array.from({ length: 1000 }, (_, n) => ({
      to: `+4915100127${String(n).padStart(3, "0")}`,
      template: ORDER_SHIPPED,
      send_at: sendAt,
    }));
    const accepted = await call(world.env.app, "POST", "/v2/messages/batch", {
      token: racer,
      body: { messages: items },
    });
    world.env.clock.set(saved);
    expect(accepted.status).toBe(200);
    const ids: string[] = accepted.body.data.map((row: { status: number; message: { id: string } }) => {
      expect(row.status).toBe(201);
      return row.message.id;
    });
    const workers = [spawnWorker(world.env, "send"), spawnWorker(world.env, "send")];
    try {
      await Bun.sleep(Math.max(0, sendAt * 1000 - Date.now()));
      const answers = await Promise.all(ids.map((id) => cancel(id, racer)));
      const canceled = new Set(ids.filter((_, i) => answers[i]!.status === 200));
      for (const answer of answers) expect([200, 409]).toContain(answer.status);
      // Everything settles: sent, or canceled.
      await eventually(async () => {
        const open = await world.env.deps.db
          .selectFrom("messages")
          .select((eb) => eb.fn.countAll().as("n"))
          .where("tenant_id", "=", race.tenantId)
          .where("status", "in", ["scheduled", "accepted"])
          .executeTakeFirstOrThrow();
        return Number(open.n) === 0;
      }, 30_000);
      const sends = await simulatorSends(world.env, race.phoneNumberId);
      const received = sends.map((send) => send.payload.biz_opaque_callback_data ?? "");
      const receivedSet = new Set(received);
      expect(received.length).toBe(receivedSet.size); // nothing twice
      for (const id of canceled) expect(receivedSet.has(id)).toBe(false);
      for (const id of ids) if (!canceled.has(id)) expect(receivedSet.has(id)).toBe(true);
      console.log(`race: ${canceled.size} canceled (200), ${ids.length - canceled.size} sent (409)`);
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
  }, 60_000);
});
