import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import { deleteExpired } from "../../src/db/batched-delete.ts";
import {
  createEventPartitions,
  dropExpiredEventPartitions,
  listEventPartitions,
  PARTITIONS_AHEAD,
} from "../../src/events/partitions.ts";
import { sequenceFeed } from "../../src/feed/sequencer.ts";
import { newId } from "../../src/ids.ts";
import { INBOUND_EVENT_EXPIRY } from "../../src/inbound/expiry.ts";
import { applyMessageRetention } from "../../src/maintenance/retention.ts";
import { insertMedia, MEDIA_EXPIRY } from "../../src/media/repository.ts";
import { IDEMPOTENCY_EXPIRY } from "../../src/messages/idempotency.ts";
import { setMessageRetention } from "../../src/tenants/repository.ts";
import {
  createShop,
  customerWrites,
  freshPhone,
  receive,
  type Shop,
  storeMessageRows,
} from "../support/fixtures.ts";
import { call, createTestEnv, type TestEnv } from "../support/index.ts";

/**
 * Retention (issue 25, src/maintenance/retention.ts): a tenant's messages older than its bound go,
 * with their feed entries, events and ended conversations; nothing else does (newer rows, unsent and
 * scheduled sends, other tenants, contacts); and the readers carry on across the removed range.
 */

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { token: 1000 } });
});
afterAll(() => env.close());

const DAY = 86_400_000;

/** Messages written by the one writer (src/messages/store.ts), as a send or a webhook would. */
async function write(
  tenant: Shop,
  items: {
    phone: string;
    daysAgo: number;
    direction?: "inbound" | "outbound";
    /** A sent message has the provider's id; an unsent one is still waiting for the send worker. */
    sent?: boolean;
    scheduled?: boolean;
    text?: string;
  }[],
): Promise<string[]> {
  const now = env.clock.now().getTime();
  const ids = await storeMessageRows(
    env.deps.db,
    items.map((item) => {
      const inbound = item.direction === "inbound";
      const text = item.text ?? "hello";
      return {
        tenantId: tenant.tenantId,
        senderId: tenant.sender.id,
        direction: item.direction,
        phone: item.phone,
        text,
        status: item.scheduled ? "scheduled" : undefined,
        content: inbound ? null : { type: "text", text: { body: text } },
        providerMessageId: inbound || item.sent !== false ? `wamid.retention-${newId("req")}` : null,
        createdAt: new Date(now - item.daysAgo * DAY),
        ...(item.scheduled && { sendAt: new Date(now + DAY) }),
      };
    }),
  );
  while ((await sequenceFeed(env.deps.db)).taken > 0);
  return ids;
}

const phone = freshPhone;

async function remaining(ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const rows = await env.deps.db.selectFrom("messages").select("id").where("id", "in", ids).execute();
  const left = new Set(rows.map((r) => r.id));
  return ids.filter((id) => left.has(id));
}

async function feedEntries(ids: string[]): Promise<number> {
  const row = await env.deps.db
    .selectFrom("feed_entries")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .where("message_id", "in", ids)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

describe("message retention", () => {
  test("removes exactly what is older than the tenant's bound, with its feed entries and ended conversations", async () => {
    const shop = await createShop(env, "Retention shop");
    const neighbour = await createShop(env, "Retention neighbour"); // the default 400 days
    await setMessageRetention(env.deps.db, shop.tenantId, 10);
    const gone = phone();
    const stays = phone();

    const old = await write(shop, [
      { phone: gone, daysAgo: 20, direction: "inbound" },
      { phone: gone, daysAgo: 19 },
      { phone: stays, daysAgo: 12 },
      { phone: stays, daysAgo: 10.01, direction: "inbound" },
    ]);
    const kept = await write(shop, [
      { phone: stays, daysAgo: 9.99 }, // just inside the bound
      { phone: stays, daysAgo: 11, sent: false }, // still waiting for the send worker: never lost
      { phone: stays, daysAgo: 11, scheduled: true, sent: false },
      { phone: stays, daysAgo: 1, direction: "inbound" },
    ]);
    const theirs = await write(neighbour, [{ phone: gone, daysAgo: 300 }]);
    expect(await feedEntries(old)).toBe(4);

    const result = await applyMessageRetention(env.deps.db, env.clock.now());
    expect(result).toMatchObject({ messages: 4, conversations: 1, done: true });
    expect(await remaining(old)).toEqual([]);
    expect(await remaining(kept)).toEqual(kept);
    expect(await remaining(theirs)).toEqual(theirs);
    expect(await feedEntries(old)).toBe(0);
    expect(await feedEntries([kept[0]!, kept[3]!])).toBe(2);

    // The contact whose every message went keeps its row (and its opt-out) but leaves the list.
    const contacts = await env.deps.db
      .selectFrom("contacts")
      .select(["id", "phone"])
      .where("tenant_id", "=", shop.tenantId)
      .execute();
    expect(contacts.map((c) => c.phone).sort()).toEqual([gone, stays].sort());
    const list = await call(env.app, "GET", "/v2/conversations", { token: shop.token });
    expect(list.status).toBe(200);
    expect(list.body.data.map((c: { contact: { phone: string } }) => c.contact.phone)).toEqual([stays]);

    // History of the remaining conversation: what is left, in order.
    const staysId = contacts.find((c) => c.phone === stays)!.id;
    const history = await call(env.app, "GET", `/v2/contacts/${staysId}/messages?limit=100`, {
      token: shop.token,
    });
    expect(history.status).toBe(200);
    expect(history.body.data.map((m: { id: string }) => m.id).sort()).toEqual([...kept].sort());

    // A second pass finds nothing more.
    expect(await applyMessageRetention(env.deps.db, env.clock.now())).toMatchObject({
      messages: 0,
      conversations: 0,
    });
  });

  test("a feed cursor older than retention reads on from the oldest retained entry", async () => {
    const shop = await createShop(env, "Retention feed");
    await setMessageRetention(env.deps.db, shop.tenantId, 5);
    const customer = phone();
    const old = await write(shop, [
      { phone: customer, daysAgo: 8, text: "old 1" },
      { phone: customer, daysAgo: 7, text: "old 2" },
      { phone: customer, daysAgo: 6, text: "old 3" },
    ]);
    const recent = await write(shop, [
      { phone: customer, daysAgo: 2, text: "recent 1" },
      { phone: customer, daysAgo: 1, text: "recent 2" },
    ]);
    const first = await call(env.app, "GET", "/v2/messages?limit=1", { token: shop.token });
    expect(first.body.data.map((m: { id: string }) => m.id)).toEqual([old[0]]);
    const cursor = first.body.next_cursor as string;

    expect((await applyMessageRetention(env.deps.db, env.clock.now())).messages).toBe(3);

    // The cursor pointed into the removed range: no error, no gap in what is retained.
    const page = await call(env.app, "GET", `/v2/messages?since=${encodeURIComponent(cursor)}`, {
      token: shop.token,
    });
    expect(page.status).toBe(200);
    expect(page.body.data.map((m: { id: string }) => m.id)).toEqual(recent);
    // Reading from the start gives the same.
    const fromStart = await call(env.app, "GET", "/v2/messages", { token: shop.token });
    expect(fromStart.body.data.map((m: { id: string }) => m.id)).toEqual(recent);
  });

  test("events older than the bound go; the event list starts at the oldest retained", async () => {
    const shop = await createShop(env, "Retention events");
    await setMessageRetention(env.deps.db, shop.tenantId, 3);
    const customer = phone();
    const received = await write(shop, [
      { phone: customer, daysAgo: 4, direction: "inbound", text: "old question" },
      { phone: customer, daysAgo: 0.5, direction: "inbound", text: "new question" },
    ]);
    // Events are numbered when the sequencer takes them (now): the first one is made as old as its
    // message, as if it had been logged then.
    const events = await env.deps.db
      .selectFrom("events")
      .select(["seq", "message_id"])
      .where("tenant_id", "=", shop.tenantId)
      .orderBy("seq")
      .execute();
    expect(events.map((e) => e.message_id)).toEqual(received);
    await env.deps.db
      .updateTable("events")
      .set({ created_at: new Date(env.clock.now().getTime() - 4 * DAY) })
      .where("tenant_id", "=", shop.tenantId)
      .where("seq", "=", events[0]!.seq)
      .execute();

    const result = await applyMessageRetention(env.deps.db, env.clock.now());
    expect(result).toMatchObject({ messages: 1, events: 1 });
    const left = await env.deps.db
      .selectFrom("events")
      .select("message_id")
      .where("tenant_id", "=", shop.tenantId)
      .execute();
    expect(left.map((e) => e.message_id)).toEqual([received[1]!]);
    const page = await call(env.app, "GET", "/v2/events", { token: shop.token });
    expect(page.status).toBe(200);
    expect(page.body.data.map((e: { data: { id: string } }) => e.data.id)).toEqual([received[1]]);
  });

  test("a pass stops at its time budget and the next one goes on", async () => {
    const shop = await createShop(env, "Retention budget");
    await setMessageRetention(env.deps.db, shop.tenantId, 1);
    const customer = phone();
    const old = await write(
      shop,
      Array.from({ length: 30 }, (_, i) => ({ phone: customer, daysAgo: 2 + i / 100 })),
    );
    const first = await applyMessageRetention(env.deps.db, env.clock.now(), { batch: 10, budgetMs: 0 });
    expect(first.done).toBe(false);
    let passes = 0;
    while ((await remaining(old)).length > 0 && passes++ < 20) {
      await applyMessageRetention(env.deps.db, env.clock.now(), { batch: 10 });
    }
    expect(await remaining(old)).toEqual([]);
  });
});

describe("idempotency records", () => {
  test("go after 24 hours, in batches, and nothing younger", async () => {
    const shop = await createShop(env, "Retention keys");
    const now = env.clock.now().getTime();
    const rows = [25, 24.5, 23.5, 1].map((hoursAgo, i) => ({
      application_id: shop.clientId,
      key: `retention-${i}`,
      tenant_id: shop.tenantId,
      request_hash: Buffer.alloc(32, i),
      message_id: newId("msg"),
      created_at: new Date(now - hoursAgo * 3_600_000),
    }));
    await env.deps.db.insertInto("idempotency_keys").values(rows).execute();
    expect(await deleteExpired(env.deps.db, env.clock.now(), IDEMPOTENCY_EXPIRY)).toBeGreaterThanOrEqual(2);
    const left = await env.deps.db
      .selectFrom("idempotency_keys")
      .select("key")
      .where("application_id", "=", shop.clientId)
      .execute();
    expect(left.map((r) => r.key).sort()).toEqual(["retention-2", "retention-3"]);
  });
});

describe("the other tables' own bounds", () => {
  test("a finalized inbound payload goes after 7 days; an unfinalized one never", async () => {
    const shop = await createShop(env, "Retention payloads");
    const customer = phone().slice(1);
    await receive(env, shop, { type: "text", text: "finalized", from: customer });
    const waiting = await customerWrites(env, shop.phoneNumberId, {
      type: "text",
      text: "not finalized",
      from: customer,
    });
    const payloads = () =>
      env.deps.db
        .selectFrom("inbound_events")
        .select(["provider_message_id", "finalized_at"])
        .where("tenant_id", "=", shop.tenantId)
        .execute();
    expect(await payloads()).toHaveLength(2);
    const at = (days: number) => new Date(env.clock.now().getTime() + days * DAY);
    expect(await deleteExpired(env.deps.db, at(6.9), INBOUND_EVENT_EXPIRY)).toBe(0);
    expect(await deleteExpired(env.deps.db, at(7.1), INBOUND_EVENT_EXPIRY)).toBeGreaterThanOrEqual(1);
    expect((await payloads()).map((p) => p.provider_message_id)).toEqual([waiting]);
  });

  test("a media row goes 90 days after its expiry, not before", async () => {
    const shop = await createShop(env, "Retention media");
    const createdAt = env.clock.now();
    const media = await insertMedia(env.deps.db, {
      id: newId("med"),
      tenant_id: shop.tenantId,
      sender_id: shop.sender.id,
      type: "document",
      mime_type: "application/pdf",
      filename: "invoice.pdf",
      size_bytes: 1000,
      provider_media_id: "retention-media-1",
      created_at: createdAt,
      expires_at: new Date(createdAt.getTime() + 30 * DAY),
    });
    const exists = async () =>
      (await env.deps.db.selectFrom("media").select("id").where("id", "=", media.id).executeTakeFirst()) !==
      undefined;
    await deleteExpired(env.deps.db, new Date(createdAt.getTime() + 119 * DAY), MEDIA_EXPIRY);
    expect(await exists()).toBe(true);
    await deleteExpired(env.deps.db, new Date(createdAt.getTime() + 121 * DAY), MEDIA_EXPIRY);
    expect(await exists()).toBe(false);
  });
});

describe("the event log's partitions", () => {
  const ids = (page: { body: { data: { data: { id: string } }[] } }) => page.body.data.map((e) => e.data.id);

  async function inDefaultPartition(tenantId: string): Promise<number> {
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM events_default WHERE tenant_id = ${tenantId}`.execute(env.deps.db);
    return rows[0]?.n ?? 0;
  }

  test("an event no partition covers waits in the default one and moves when its partition is created", async () => {
    const now = env.clock.now();
    expect((await listEventPartitions(env.deps.db)).some((p) => p.from <= now && now < p.to)).toBe(false);
    const shop = await createShop(env, "Partitions default");
    const customer = phone();
    const received = await write(
      shop,
      [0, 0, 0].map((daysAgo) => ({ phone: customer, daysAgo, direction: "inbound" })),
    );
    expect(await inDefaultPartition(shop.tenantId)).toBe(3);

    const created = await createEventPartitions(env.deps.db, now, DAY);
    expect(created.length).toBeGreaterThanOrEqual(PARTITIONS_AHEAD);
    expect(await inDefaultPartition(shop.tenantId)).toBe(0);
    expect(ids(await call(env.app, "GET", "/v2/events", { token: shop.token }))).toEqual(received);
    // Covered already: a second pass creates nothing.
    expect(await createEventPartitions(env.deps.db, now, DAY)).toEqual([]);
  });

  test("the log reads in order across partitions, and on from the oldest kept once one is dropped", async () => {
    const now = env.clock.now().getTime();
    await createEventPartitions(env.deps.db, new Date(now - 40 * DAY), DAY, 1);
    await createEventPartitions(env.deps.db, new Date(now - 20 * DAY), DAY, 1);
    const shop = await createShop(env, "Partitions dropped");
    const customer = phone();
    const received = await write(
      shop,
      [0, 0, 0, 0, 0, 0].map((daysAgo, i) => ({
        phone: customer,
        daysAgo,
        direction: "inbound",
        text: `q${i}`,
      })),
    );
    // The first two events as if logged 40 days ago, the third 20 days ago: each moves to its partition.
    const events = await env.deps.db
      .selectFrom("events")
      .select("seq")
      .where("tenant_id", "=", shop.tenantId)
      .orderBy("seq")
      .execute();
    const age = (seqs: number[], days: number) =>
      env.deps.db
        .updateTable("events")
        .set({ created_at: new Date(now - days * DAY) })
        .where("tenant_id", "=", shop.tenantId)
        .where("seq", "in", seqs)
        .execute();
    await age([events[0]!.seq, events[1]!.seq], 40);
    await age([events[2]!.seq], 20);
    const { rows: homes } = await sql<{ partition: string }>`
      SELECT tableoid::regclass::text AS partition FROM events WHERE tenant_id = ${shop.tenantId} ORDER BY seq`.execute(
      env.deps.db,
    );
    expect(new Set(homes.map((h) => h.partition)).size).toBe(3);
    expect(ids(await call(env.app, "GET", "/v2/events", { token: shop.token }))).toEqual(received);
    const first = await call(env.app, "GET", "/v2/events?limit=1", { token: shop.token });

    const dropped = await dropExpiredEventPartitions(env.deps.db, new Date(now));
    expect(dropped).toContain(homes[0]!.partition);
    expect(dropped).not.toContain(homes[2]!.partition);

    // The log starts at the oldest kept event; a cursor into the dropped range reads on from it.
    const kept = received.slice(2);
    expect(ids(await call(env.app, "GET", "/v2/events", { token: shop.token }))).toEqual(kept);
    const since = encodeURIComponent(first.body.next_cursor);
    const page = await call(env.app, "GET", `/v2/events?since=${since}`, { token: shop.token });
    expect(page.status).toBe(200);
    expect(ids(page)).toEqual(kept);
    // The messages, their feed, history and conversation are not in the log's partitions.
    const feed = await call(env.app, "GET", "/v2/messages", { token: shop.token });
    expect(feed.body.data.map((m: { id: string }) => m.id)).toEqual(received);
    const conversations = await call(env.app, "GET", "/v2/conversations", { token: shop.token });
    expect(conversations.body.data).toHaveLength(1);
    const contactId = conversations.body.data[0].contact.id;
    const history = await call(env.app, "GET", `/v2/contacts/${contactId}/messages?limit=10`, {
      token: shop.token,
    });
    expect(history.body.data.map((m: { id: string }) => m.id).sort()).toEqual([...received].sort());
  });

  test("a partition stays while any tenant keeps its rows: the longest bound, at most 30 days", async () => {
    const now = env.clock.now().getTime();
    const [old] = await createEventPartitions(env.deps.db, new Date(now - 3 * DAY), DAY, 1);
    expect(old).toBeDefined();
    const everyTenant = (days: number) =>
      env.deps.db.updateTable("tenants").set({ message_retention_days: days }).execute();
    try {
      await everyTenant(5);
      expect(await dropExpiredEventPartitions(env.deps.db, new Date(now))).not.toContain(old!);
      await everyTenant(1);
      expect(await dropExpiredEventPartitions(env.deps.db, new Date(now))).toContain(old!);
    } finally {
      await everyTenant(400);
    }
  });

  test("partitions of another width fit around the existing ones", async () => {
    const existing = await listEventPartitions(env.deps.db);
    const last = existing.at(-1)!;
    // A minute before the last daily partition ends, with partitions a minute wide from there on.
    const created = await createEventPartitions(env.deps.db, new Date(last.to.getTime() - 60_000), 60_000);
    expect(created).toHaveLength(2);
    const all = await listEventPartitions(env.deps.db);
    for (let i = 1; i < all.length; i++)
      expect(all[i]!.from.getTime()).toBeGreaterThanOrEqual(all[i - 1]!.to.getTime());
    expect(all.at(-1)!.to.getTime() - all.at(-2)!.from.getTime()).toBe(120_000);
  });
});
