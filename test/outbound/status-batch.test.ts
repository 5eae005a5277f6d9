import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Job, Worker } from "bullmq";
import { sql } from "kysely";
import pg from "pg";
import { buildWebhook, type StatusError } from "../../src/channel/webhook-payloads.ts";
import { recordUntilStored } from "../../src/outbound/claim.ts";
import { adoptProviderIds, applyStatusEvents, drainStatusEvents } from "../../src/outbound/status.ts";
import { nudgeDrain } from "../../src/queues/drain-nudge.ts";
import { queuePrefix } from "../../src/queues/index.ts";
import { createRedis } from "../../src/redis/connect.ts";
import { createShop, messageRow, type Shop, storeMessageRows } from "../support/fixtures.ts";
import {
  createTestEnv,
  deleteRedisPrefix,
  eventually,
  postWebhook,
  spawnWorker,
  type TestEnv,
} from "../support/index.ts";

let env: TestEnv;
let shop: Shop;
const T0 = 1_790_000_000;

beforeAll(async () => {
  env = await createTestEnv({ limits: { anonymous: 100_000, token: 100_000 } });
  shop = await createShop(env, "Acme");
});
afterAll(() => env.close());

interface StatusEvent {
  wamid: string;
  status: "sent" | "delivered" | "read" | "failed";
  at: number;
  biz?: string;
}

function statusWebhook(events: readonly StatusEvent[]) {
  return buildWebhook(shop.account, {
    statuses: events.map((e) => ({
      id: e.wamid,
      status: e.status,
      timestamp: String(e.at),
      recipient_id: "4915100000777",
      ...(e.biz && { biz_opaque_callback_data: e.biz }),
      ...(e.status === "failed" && {
        // Only the fields this test needs: the failure is read from code and title.
        errors: [{ code: 131026, title: "Message undeliverable" } as StatusError],
      }),
    })),
  });
}

/** Posts signed status webhooks concurrently, `perWebhook` events each; every one must get its 200. */
async function postStatuses(events: readonly StatusEvent[], perWebhook: number) {
  const posts = [];
  for (let i = 0; i < events.length; i += perWebhook) {
    const body = statusWebhook(events.slice(i, i + perWebhook));
    posts.push(postWebhook(env, body));
  }
  for (const response of await Promise.all(posts)) expect(response.status).toBe(200);
}

/** Outbound messages already `sent`, with provider ids `<prefix>-<i>` (null: the send is in doubt). */
async function outbound(prefix: string, count: number, withProviderId = true) {
  const ids = await storeMessageRows(
    env.deps.db,
    Array.from({ length: count }, (_, i) => ({
      id: `msg_${prefix.replaceAll(/[^a-zA-Z0-9]/g, "")}${String(i).padStart(6, "0")}`,
      tenantId: shop.tenantId,
      senderId: shop.sender.id,
      phone: "+4915100000777",
      status: withProviderId ? ("sent" as const) : ("accepted" as const),
      providerMessageId: withProviderId ? `${prefix}-${i}` : null,
    })),
  );
  return ids.map((id, i) => ({ id, wamid: `${prefix}-${i}` }));
}

/** The send worker learns the provider ids of messages created without one (see `outbound`). */
async function learnIds(messages: readonly { id: string; wamid: string }[]) {
  await sql`
    UPDATE messages m SET provider_message_id = v.wamid, status = 'sent'
    FROM unnest(${messages.map((m) => m.id)}::text[], ${messages.map((m) => m.wamid)}::text[])
      AS v(id, wamid)
    WHERE m.id = v.id`.execute(env.deps.db);
}

async function statusesOf(prefix: string) {
  const rows = await env.deps.db
    .selectFrom("messages")
    .select(["provider_message_id", "status", "failure"])
    .where("provider_message_id", "like", `${prefix}-%`)
    .execute();
  return new Map(rows.map((r) => [r.provider_message_id!, r]));
}

/** Every message of `prefix` has its expected status, and a failure exactly when it failed. */
async function expectStatuses(prefix: string, expected: Map<string, string>) {
  const now = await statusesOf(prefix);
  for (const [wamid, status] of expected) expect(now.get(wamid)?.status).toBe(status);
  for (const [wamid, row] of now) {
    if (row.status === "failed") expect(row.failure?.code).toBe("recipient_invalid");
    else expect(row.failure, wamid).toBeNull();
  }
}

async function statusNudges(): Promise<number> {
  const counts = await env.deps.queues.status.getJobCounts("waiting", "active", "delayed");
  return (counts.waiting ?? 0) + (counts.active ?? 0) + (counts.delayed ?? 0);
}

async function unappliedOf(prefix: string): Promise<number> {
  const row = await env.deps.db
    .selectFrom("status_events")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("provider_message_id", "like", `${prefix}-%`)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Runs `during` while another session holds the provider id's waiting status events (as a drain
 * does between its claim and its apply, or the send worker's record), and lets go after it.
 */
async function whileStatusEventsHeld<T>(wamid: string, during: () => Promise<T>): Promise<T> {
  const holder = new pg.Client({ connectionString: env.config.databaseUrl });
  await holder.connect();
  try {
    await holder.query("BEGIN");
    await holder.query("SELECT id FROM status_events WHERE provider_message_id = $1 FOR UPDATE", [wamid]);
    const result = await during();
    await holder.query("COMMIT");
    return result;
  } finally {
    await holder.end();
  }
}

/** A drain applies what waited: the message ends read, with its events sent, delivered, read in order. */
async function expectDrainedToRead(prefix: string, wamid: string, messageId: string) {
  await drainStatusEvents(env.deps.db, env.clock);
  expect((await statusesOf(prefix)).get(wamid)?.status).toBe("read");
  const events = await env.deps.db
    .selectFrom("event_pending")
    .select("type")
    .where("message_id", "=", messageId)
    .orderBy("id")
    .execute();
  expect(events.map((e) => e.type)).toEqual(["message.sent", "message.delivered", "message.read"]);
}

/** Fisher-Yates with a fixed seed: the same "random" arrival order on every run. */
function shuffled<T>(items: readonly T[], seed = 7): T[] {
  const out = [...items];
  let state = seed;
  const next = () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/**
 * Four kinds of message, by index: read (read, delivered and sent arrive, newest first);
 * delivered (delivered, then sent); failed (failed after sent); failed then delivered (delivered
 * wins over failed). `late` holds each message's oldest event, posted after the first drain.
 */
function eventsFor(messages: { wamid: string }[]) {
  const first: StatusEvent[] = [];
  const late: StatusEvent[] = [];
  const expected = new Map<string, string>();
  messages.forEach(({ wamid }, i) => {
    const kind = i % 4;
    if (kind === 0) {
      first.push({ wamid, status: "read", at: T0 + 3 }, { wamid, status: "delivered", at: T0 + 2 });
      late.push({ wamid, status: "sent", at: T0 + 1 });
      expected.set(wamid, "read");
    } else if (kind === 1) {
      first.push({ wamid, status: "delivered", at: T0 + 2 });
      late.push({ wamid, status: "sent", at: T0 + 1 });
      expected.set(wamid, "delivered");
    } else if (kind === 2) {
      first.push({ wamid, status: "failed", at: T0 + 2 }, { wamid, status: "sent", at: T0 + 1 });
      expected.set(wamid, "failed");
    } else {
      first.push({ wamid, status: "delivered", at: T0 + 3 }, { wamid, status: "failed", at: T0 + 2 });
      expected.set(wamid, "delivered");
    }
  });
  return { first, late, expected };
}

/**
 * The oldest events (`late`) arrive once the first ones are applied: they settle at once and move no
 * message backwards.
 */
async function postLateEvents(prefix: string, late: readonly StatusEvent[], expected: Map<string, string>) {
  await postStatuses(shuffled(late, 11), 50);
  await expectStatuses(prefix, expected);
  expect(await unappliedOf(prefix)).toBe(0);
}

describe("status events in batches", () => {
  test("statuses of 500 known messages are applied by the webhook store itself, out of order, never backwards", async () => {
    const messages = await outbound("wamid.ingest", 500);
    const { first, late, expected } = eventsFor(messages);
    const nudgesBefore = await statusNudges();
    await postStatuses(shuffled(first), 25);
    // Nothing waits for a drain, and no drain is nudged.
    expect(await unappliedOf("wamid.ingest")).toBe(0);
    expect(await statusNudges()).toBe(nudgesBefore);
    await expectStatuses("wamid.ingest", expected);
    // The oldest events arrive last: nothing moves backwards.
    await postLateEvents("wamid.ingest", late, expected);
  });

  test("status events for 500 messages are applied in one drain, out of order, never backwards", async () => {
    // Statuses that overtook their sends: they wait until the provider ids are known.
    const messages = await outbound("wamid.bulk", 500, false);
    const { first, late, expected } = eventsFor(messages);
    expect(first.length).toBeGreaterThan(500);
    // Shuffled across messages, and each message's events newest first within the shuffle's ties.
    await postStatuses(shuffled(first), 25);
    expect(await unappliedOf("wamid.bulk")).toBe(first.length);
    await learnIds(messages);

    const drained = await drainStatusEvents(env.deps.db, env.clock);
    // One batch is one transaction: everything in one.
    expect(drained).toEqual({ applied: first.length, messages: 500, adopted: 0, batches: 1 });
    await expectStatuses("wamid.bulk", expected);

    // The oldest events arrive last, once the messages are known: settled, nothing moves backwards.
    await postLateEvents("wamid.bulk", late, expected);
  });

  test("50 concurrent webhooks are committed in far fewer than 50 transactions, with one nudge", async () => {
    const messages = await outbound("wamid.group", 50, false);
    await postStatuses(
      messages.map(({ wamid }) => ({ wamid, status: "delivered" as const, at: T0 + 2 })),
      1,
    );
    // now() is the transaction's start: one received_at per transaction.
    const transactions = await env.deps.db
      .selectFrom("status_events")
      .select((eb) => eb.fn.count<number>("received_at").distinct().as("n"))
      .where("provider_message_id", "like", "wamid.group-%")
      .executeTakeFirstOrThrow();
    expect(await unappliedOf("wamid.group")).toBe(50);
    expect(Number(transactions.n)).toBeLessThanOrEqual(10);
    // Every webhook of this file that stored a status nudged the queue; no worker ran: one job waits.
    expect(await statusNudges()).toBe(1);
    await learnIds(messages);
    const drained = await drainStatusEvents(env.deps.db, env.clock);
    expect(drained.applied).toBe(50);
    expect(drained.batches).toBe(1);
  });

  test("two drains in parallel apply each event once and never move a message backwards", async () => {
    const messages = await outbound("wamid.twin", 300, false);
    const events: StatusEvent[] = messages.flatMap(({ wamid }) => [
      { wamid, status: "read", at: T0 + 3 },
      { wamid, status: "delivered", at: T0 + 2 },
      { wamid, status: "sent", at: T0 + 1 },
    ]);
    // Shuffled, so one message's events land in different batches of different drains.
    await postStatuses(shuffled(events, 3), 30);
    await learnIds(messages);
    const [a, b] = await Promise.all([
      drainStatusEvents(env.deps.db, env.clock, 40),
      drainStatusEvents(env.deps.db, env.clock, 40),
    ]);
    expect(a.applied + b.applied).toBe(events.length);
    expect(a.applied).toBeGreaterThan(0);
    expect(b.applied).toBeGreaterThan(0);
    expect(await unappliedOf("wamid.twin")).toBe(0);
    for (const row of (await statusesOf("wamid.twin")).values()) expect(row.status).toBe("read");
  });

  test("events of a send in doubt wait for its provider id; an echo of our id adopts it", async () => {
    const [doubt, echoed] = await outbound("wamid.doubt", 2, false);
    await postStatuses(
      [
        { wamid: "wamid.doubt-x", status: "delivered", at: T0 + 2 },
        { wamid: "wamid.doubt-y", status: "read", at: T0 + 3, biz: echoed!.id },
      ],
      2,
    );
    const first = await drainStatusEvents(env.deps.db, env.clock);
    expect(first).toEqual({ applied: 1, messages: 1, adopted: 1, batches: 1 });
    const rows = await env.deps.db
      .selectFrom("messages")
      .select(["id", "status", "provider_message_id"])
      .where("id", "in", [doubt!.id, echoed!.id])
      .orderBy("id")
      .execute();
    expect(rows).toEqual([
      { id: doubt!.id, status: "accepted", provider_message_id: null },
      { id: echoed!.id, status: "read", provider_message_id: "wamid.doubt-y" },
    ]);
    // Still pending, and not taken again and again: the drain ends.
    expect(await unappliedOf("wamid.doubt")).toBe(1);
    expect(await drainStatusEvents(env.deps.db, env.clock)).toEqual({
      applied: 0,
      messages: 0,
      adopted: 0,
      batches: 1,
    });
    // The send worker learns the id: the event applies (its path, and the drain's, alike).
    expect(
      await adoptProviderIds(env.deps.db, env.clock, [
        { messageId: doubt!.id, providerMessageId: "wamid.doubt-x" },
      ]),
    ).toBe(1);
    expect(await applyStatusEvents(env.deps.db, env.clock, "wamid.doubt-x")).toBe(1);
    expect((await statusesOf("wamid.doubt")).get("wamid.doubt-x")?.status).toBe("delivered");
  });

  test("a waiting delivered is applied with the send's provider id: a read arriving meanwhile comes after it", async () => {
    const [message] = await outbound("wamid.race", 1, false);
    const wamid = "wamid.race-0";
    await postStatuses([{ wamid, status: "delivered", at: T0 + 1 }], 1);
    expect(await unappliedOf("wamid.race")).toBe(1);
    // Another session holds the waiting delivered, so the send worker's apply stops right there.
    const { recording } = await whileStatusEventsHeld(wamid, async () => {
      const row = await messageRow(env.deps.db, message!.id);
      const recording = recordUntilStored(env.deps, [
        {
          id: message!.id,
          providerMessageId: wamid,
          senderId: shop.sender.id,
          contactId: row.contact_id,
          outcome: "sent",
        },
      ]);
      await Bun.sleep(300);
      // The read webhook meanwhile: its message has a status waiting, so it waits behind it (at
      // 7ed3478 the known id let the read be applied here, and the delivered was dropped after).
      await postStatuses([{ wamid, status: "read", at: T0 + 2 }], 1);
      return { recording };
    });
    expect((await recording).ids).toEqual(new Set([message!.id]));
    await expectDrainedToRead("wamid.race", wamid, message!.id);
  });

  test("a read arriving while a drain holds a waiting delivered waits behind it", async () => {
    const [message] = await outbound("wamid.held", 1, false);
    const wamid = "wamid.held-0";
    await postStatuses([{ wamid, status: "delivered", at: T0 + 1 }], 1);
    // Recorded without the deferral (an adoption, say): the id is known, its delivered still waits.
    expect(
      await adoptProviderIds(env.deps.db, env.clock, [{ messageId: message!.id, providerMessageId: wamid }]),
    ).toBe(1);
    expect(await unappliedOf("wamid.held")).toBe(1);
    // Another session holds the waiting delivered, as a drain does between its claim and its apply.
    await whileStatusEventsHeld(wamid, async () => {
      // Applied directly, this read would move the message past the held delivered, which the
      // drain would then drop as out of order, and its event with it.
      await postStatuses([{ wamid, status: "read", at: T0 + 2 }], 1);
      expect((await statusesOf("wamid.held")).get(wamid)?.status).toBe("sent");
      expect(await unappliedOf("wamid.held")).toBe(2);
    });
    await expectDrainedToRead("wamid.held", wamid, message!.id);
  });

  test("a status that cannot move its message takes no lock: it is settled while another session holds the row", async () => {
    const [message] = await outbound("wamid.settled", 1);
    const wamid = "wamid.settled-0";
    await postStatuses([{ wamid, status: "read", at: T0 + 2 }], 1);
    expect((await statusesOf("wamid.settled")).get(wamid)?.status).toBe("read");
    const holder = new pg.Client({ connectionString: env.config.databaseUrl });
    await holder.connect();
    try {
      // As the send worker's record or another webhook batch holding the message.
      await holder.query("BEGIN");
      await holder.query("SELECT seq FROM messages WHERE id = $1 FOR UPDATE", [message!.id]);
      // A sent and a delivered behind a read move nothing: answered while the row is held (locked,
      // they would wait for the holder), nothing stored to wait, no event.
      const answered = await Promise.race([
        postStatuses(
          [
            { wamid, status: "sent", at: T0 },
            { wamid, status: "delivered", at: T0 + 1 },
          ],
          2,
        ).then(() => true),
        Bun.sleep(3000).then(() => false),
      ]);
      expect(answered).toBe(true);
      expect(await unappliedOf("wamid.settled")).toBe(0);
      await holder.query("COMMIT");
    } finally {
      await holder.end();
    }
    expect((await statusesOf("wamid.settled")).get(wamid)?.status).toBe("read");
    const events = await env.deps.db
      .selectFrom("event_pending")
      .select("type")
      .where("message_id", "=", message!.id)
      .execute();
    expect(events.map((e) => e.type)).toEqual(["message.read"]);
  });

  test("a nudge that arrives while the drain job is active is kept and runs after it", async () => {
    const connection = createRedis(env.config, { forQueues: true });
    const started: number[] = [];
    let release: () => void = () => {};
    const blocked = new Promise<void>((resolve) => {
      release = resolve;
    });
    // Stand-in for the status worker: the first drain waits until told, as if after its last read.
    const worker = new Worker(
      "status",
      async (job: Job) => {
        started.push(job.data.nudgedAt);
        if (started.length === 1) await blocked;
      },
      { connection, prefix: queuePrefix(env.config.redisPrefix, "status"), concurrency: 5 },
    );
    try {
      // Whatever earlier tests left waiting runs first.
      await eventually(async () => started.length >= 1);
      const firstRun = started.length;
      await nudgeDrain(env.deps.queues.status, { nudgedAt: 1 });
      await nudgeDrain(env.deps.queues.status, { nudgedAt: 2 });
      await Bun.sleep(200);
      // The first job is still active; the nudges wait behind it, coalesced into one.
      expect(started.length).toBe(firstRun);
      release();
      await eventually(async () => started.length === firstRun + 1);
      await Bun.sleep(300);
      expect(started.length).toBe(firstRun + 1);
      expect(started.at(-1)).toBe(2);
    } finally {
      release();
      await worker.close();
      connection.disconnect();
    }
  });

  test("the status worker applies what webhooks stored (real process)", async () => {
    const messages = await outbound("wamid.worker", 40, false);
    const worker = spawnWorker(env, "status");
    try {
      await postStatuses(
        shuffled(
          messages.flatMap(({ wamid }) => [
            { wamid, status: "read" as const, at: T0 + 3 },
            { wamid, status: "delivered" as const, at: T0 + 2 },
          ]),
        ),
        8,
      );
      expect(await unappliedOf("wamid.worker")).toBe(80);
      // The ids are learned (as the send worker would, which then applies them itself): a nudge.
      await learnIds(messages);
      await nudgeDrain(env.deps.queues.status, { nudgedAt: Date.now() });
      await eventually(async () => (await unappliedOf("wamid.worker")) === 0);
      for (const row of (await statusesOf("wamid.worker")).values()) expect(row.status).toBe("read");
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  });

  test("Redis flushed: the sweeper nudges one drain for every pending event", async () => {
    const messages = await outbound("wamid.swept", 20, false);
    await postStatuses(
      messages.map(({ wamid }) => ({ wamid, status: "delivered" as const, at: T0 + 2 })),
      5,
    );
    await learnIds(messages);
    await deleteRedisPrefix(env.config.redisPrefix);
    const { sweep } = await import("../../src/maintenance/sweeper.ts");
    env.clock.advance(60);
    const swept = await sweep(env.deps, 10);
    env.clock.set(new Date());
    expect(swept.status).toBe(1);
    const counts = await env.deps.queues.status.getJobCounts("waiting");
    expect(counts.waiting).toBe(1);
    const worker = spawnWorker(env, "status");
    try {
      await eventually(async () => (await unappliedOf("wamid.swept")) === 0);
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  });
});
