import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type App, createApp } from "../../src/app.ts";
import { createDb, type Db } from "../../src/db/connect.ts";
import { createFeedHeadWriter, type FeedHeadWriter, parseFeedHead } from "../../src/feed/heads.ts";
import { bumpFeedEpoch, currentFeedEpoch } from "../../src/feed/repository.ts";
import { sequenceFeed, startFeedSequencer } from "../../src/feed/sequencer.ts";
import { createLogger } from "../../src/logger.ts";
import { createShop, type Shop } from "../support/fixtures.ts";
import { type CallResult, call, createTestEnv, type TestEnv } from "../support/index.ts";
import { insertContact, insertOutbound } from "../support/reading.ts";

let env: TestEnv;
/** Postgres that cannot be reached: the same app, but any query it makes fails. */
let deadDb: Db;
let noPostgres: App;

beforeAll(async () => {
  env = await createTestEnv();
  deadDb = createDb("postgres://postgres@127.0.0.1:1/unreachable", { max: 1 });
  noPostgres = createApp({ ...env.deps, db: deadDb });
});
afterAll(async () => {
  await deadDb.destroy();
  await env.close();
});

const silent = createLogger("silent");

function poll(app: App, tenant: Shop, since?: string, limit = 7): Promise<CallResult> {
  const query = new URLSearchParams({ limit: String(limit), ...(since !== undefined && { since }) });
  return call(app, "GET", `/v2/messages?${query}`, { token: tenant.token });
}

/** What the sequencer loop does: number everything pending, raising heads after each commit. */
async function sequenceAll(writer?: FeedHeadWriter): Promise<void> {
  while ((await sequenceFeed(env.deps.db, undefined, writer)).taken > 0);
}

async function headOf(tenant: Shop) {
  return parseFeedHead(await env.deps.redis.get(env.deps.keys.feedHead(tenant.tenantId)));
}

async function tenantWithMessages(name: string, count: number, phone: string) {
  const tenant = await createShop(env, name);
  const contact = await insertContact(env, tenant, phone);
  const send = () => insertOutbound(env, tenant, { contactId: contact.id, createdAt: env.clock.now() });
  for (let i = 0; i < count; i++) await send();
  return { tenant, send };
}

/** Header names of an answer, without the ones that differ per request by nature. */
const headerNames = (result: CallResult) => [...result.headers.keys()].sort();

describe("feed head in Redis", () => {
  test("a poll at the head is answered without Postgres, exactly as Postgres answers it", async () => {
    const writer = createFeedHeadWriter(env.deps.redis, env.deps.keys);
    const { tenant } = await tenantWithMessages("Head shop", 3, "+4915100090001");
    await sequenceAll(writer);
    expect(await headOf(tenant)).toEqual({ epoch: await currentFeedEpoch(env.deps.db), seq: 3 });

    const first = await poll(env.app, tenant);
    expect(first.body.data).toHaveLength(3);
    const atHead = first.body.next_cursor;

    // Postgres's answer (the head key gone), then Redis's to the same poll.
    await env.deps.redis.del(env.deps.keys.feedHead(tenant.tenantId));
    const fromPostgres = await poll(env.app, tenant, atHead);
    writer.syncDue = true;
    await sequenceAll(writer);
    expect((await headOf(tenant))?.seq).toBe(3);
    const fromRedis = await poll(noPostgres, tenant, atHead);

    expect(fromPostgres.status).toBe(200);
    expect(fromRedis.status).toBe(200);
    expect(fromRedis.body).toEqual(fromPostgres.body);
    expect(fromRedis.body).toEqual({
      object: "list",
      url: "/v2/messages",
      has_more: false,
      data: [],
      next_cursor: atHead,
    });
    expect(headerNames(fromRedis)).toEqual(headerNames(fromPostgres));
    expect(fromRedis.headers.get("ratelimit-limit")).toBe(fromPostgres.headers.get("ratelimit-limit"));

    // The same app behind the head does need Postgres, and cannot reach it: the answer above did not.
    const behind = await poll(noPostgres, tenant);
    expect(behind.status).toBeGreaterThanOrEqual(500);
  });

  test("a message numbered after a poll at the head is seen on the next poll", async () => {
    const writer = createFeedHeadWriter(env.deps.redis, env.deps.keys);
    const { tenant, send } = await tenantWithMessages("Head follow", 2, "+4915100090002");
    await sequenceAll(writer);
    const atHead = (await poll(env.app, tenant)).body.next_cursor;
    expect((await poll(noPostgres, tenant, atHead)).body).toMatchObject({ data: [], next_cursor: atHead });

    const later = await send();
    // Committed but not numbered yet: nothing, the cursor stays.
    expect((await poll(noPostgres, tenant, atHead)).body).toMatchObject({ data: [], next_cursor: atHead });
    await sequenceAll(writer);
    expect((await headOf(tenant))?.seq).toBe(3);
    const next = await poll(env.app, tenant, atHead);
    expect(next.body.data.map((m: { id: string }) => m.id)).toEqual([later]);
    expect((await poll(noPostgres, tenant, next.body.next_cursor)).body).toMatchObject({
      data: [],
      has_more: false,
      next_cursor: next.body.next_cursor,
    });
  });

  test("numbered but not yet raised (a sequencer died after its commit): the reader waits, then sees it", async () => {
    const writer = createFeedHeadWriter(env.deps.redis, env.deps.keys);
    const { tenant, send } = await tenantWithMessages("Head lag", 1, "+4915100090003");
    await sequenceAll(writer);
    const atHead = (await poll(env.app, tenant)).body.next_cursor;

    const later = await send();
    await sequenceAll(); // committed, head not raised
    expect((await headOf(tenant))?.seq).toBe(1);
    expect((await poll(env.app, tenant, atHead)).body).toMatchObject({ data: [], next_cursor: atHead });

    // A process starting (or the marker lapsing) syncs every head from feed_heads.
    await sequenceAll(createFeedHeadWriter(env.deps.redis, env.deps.keys));
    expect((await headOf(tenant))?.seq).toBe(2);
    expect((await poll(env.app, tenant, atHead)).body.data.map((m: { id: string }) => m.id)).toEqual([later]);
  });

  test("a head Redis lost falls back to Postgres, and the next tick puts it back", async () => {
    const writer = createFeedHeadWriter(env.deps.redis, env.deps.keys);
    const { tenant, send } = await tenantWithMessages("Head lost", 2, "+4915100090004");
    await sequenceAll(writer);
    const atHead = (await poll(env.app, tenant)).body.next_cursor;

    // Redis restarted empty: the head and the sync marker are gone.
    // Two DELs: on a Redis Cluster the keys are in different slots.
    await env.deps.redis.del(env.deps.keys.feedHead(tenant.tenantId));
    await env.deps.redis.del(env.deps.keys.feedHeadsSynced());
    expect((await poll(noPostgres, tenant, atHead)).status).toBeGreaterThanOrEqual(500);
    expect((await poll(env.app, tenant, atHead)).body).toMatchObject({ data: [], next_cursor: atHead });
    const later = await send();
    await sequenceAll(); // numbered by a sequencer that raises nothing: only Postgres knows
    const fromPostgres = await poll(env.app, tenant, atHead);
    expect(fromPostgres.body.data.map((m: { id: string }) => m.id)).toEqual([later]);

    // Any tick finds the marker gone and syncs every head.
    await sequenceFeed(env.deps.db, undefined, writer);
    expect((await headOf(tenant))?.seq).toBe(3);
    expect((await poll(noPostgres, tenant, fromPostgres.body.next_cursor)).body).toMatchObject({
      data: [],
      next_cursor: fromPostgres.body.next_cursor,
    });
  });

  test("raise only: an older head never lowers a newer one; a later epoch wins at any position", async () => {
    const key = env.deps.keys.feedHead("ten_raise_only");
    const raise = (epoch: number, seq: number) => env.deps.redis.raiseFeedHead(key, epoch, seq);
    expect(await raise(1, 10)).toBe(1);
    expect(await raise(1, 7)).toBe(0);
    expect(await raise(1, 10)).toBe(0);
    expect(parseFeedHead(await env.deps.redis.get(key))).toEqual({ epoch: 1, seq: 10 });
    expect(await raise(2, 3)).toBe(1);
    expect(await raise(1, 50)).toBe(0);
    expect(parseFeedHead(await env.deps.redis.get(key))).toEqual({ epoch: 2, seq: 3 });
  });

  test("readers polling while sequencer loops raise heads see every message once, in order", async () => {
    const { tenant, send } = await tenantWithMessages("Head race", 0, "+4915100090006");
    const heads = { redis: env.config, redisPrefix: env.config.redisPrefix };
    const loops = [0, 1].map(() => startFeedSequencer(env.deps.db, silent, { intervalMs: 5, heads }));
    const written: string[] = [];
    let writing = true;
    const reader = async () => {
      const seen: string[] = [];
      let since: string | undefined;
      for (;;) {
        const done = !writing;
        const page = (await poll(env.app, tenant, since)).body;
        seen.push(...page.data.map((m: { id: string }) => m.id));
        since = page.next_cursor;
        if (done && page.data.length === 0) return seen;
        if (!page.has_more) await Bun.sleep(2);
      }
    };
    const readers = [reader(), reader()];
    const writer = async () => {
      for (let i = 0; i < 50; i++) written.push((await send()) as string);
    };
    await Promise.all([writer(), writer(), writer()]);
    await Promise.all(loops.map((loop) => loop.stop()));
    await sequenceAll(createFeedHeadWriter(env.deps.redis, env.deps.keys));
    writing = false;
    const order = (await poll(env.app, tenant, undefined, 500)).body.data.map((m: { id: string }) => m.id);
    expect(order.toSorted()).toEqual(written.toSorted());
    for (const seen of await Promise.all(readers)) expect(seen).toEqual(order);
  });

  // Last: it moves the epoch for the whole database.
  test("after bump-epoch an old cursor at the head restarts at 0, as before", async () => {
    const writer = createFeedHeadWriter(env.deps.redis, env.deps.keys);
    const { tenant } = await tenantWithMessages("Head epoch", 2, "+4915100090005");
    await sequenceAll(writer);
    const first = await poll(env.app, tenant);
    const ids = first.body.data.map((m: { id: string }) => m.id);
    const oldCursor = first.body.next_cursor;
    const before = await currentFeedEpoch(env.deps.db);

    const bumped = await bumpFeedEpoch(env.deps.db);
    // Until a tick syncs the heads to the new epoch, the old cursor only waits (never skips ahead).
    expect((await poll(noPostgres, tenant, oldCursor)).body).toMatchObject({
      data: [],
      next_cursor: oldCursor,
    });
    await sequenceFeed(env.deps.db, undefined, writer);
    expect(await headOf(tenant)).toEqual({ epoch: bumped, seq: 2 });
    expect(bumped).toBe(before + 1);

    // Another epoch than the head's: Postgres answers, from 0.
    expect((await poll(noPostgres, tenant, oldCursor)).status).toBeGreaterThanOrEqual(500);
    const again = await poll(env.app, tenant, oldCursor);
    expect(again.body.data.map((m: { id: string }) => m.id)).toEqual(ids);
    expect(again.body.next_cursor).not.toBe(oldCursor);
    expect((await poll(noPostgres, tenant, again.body.next_cursor)).body).toMatchObject({
      data: [],
      has_more: false,
      next_cursor: again.body.next_cursor,
    });
  });
});
