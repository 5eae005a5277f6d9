import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import { createDb } from "../../src/db/connect.ts";
import { ADVISORY_LOCKS } from "../../src/db/locks.ts";
import { feedOldestPendingAgeSeconds, feedPendingCount } from "../../src/feed/metrics.ts";
import { ensureFeedShards, sequenceFeed } from "../../src/feed/sequencer.ts";
import { createShop, type Shop, storeMessageRows } from "../support/fixtures.ts";
import { createTestEnv, type TestEnv } from "../support/index.ts";
import { expectLostNothing, insertContact, lostNothingTenant } from "../support/reading.ts";

/**
 * The sharded feed sequencer (sql/010_feed_shards.sql, src/feed/sequencer.ts): tenants hash to
 * shards, each shard numbered under its own lock; the count only grows. One database for the file,
 * so the tests run in order: one shard, then four.
 */

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { token: 1000 } });
});
afterAll(() => env.close());

async function shardOf(tenantId: string, shards: number): Promise<number> {
  const { rows } = await sql<{
    shard: number;
  }>`SELECT feed_shard_of(${tenantId}, ${shards}::int) AS shard`.execute(env.deps.db);
  return rows[0]!.shard;
}

/**
 * `count` tenants made by `make` whose shards of four differ: tenant ids are random, so make them
 * until they do (40 tries miss with odds of about 1 in 30,000).
 */
async function inDistinctShards<T extends { tenantId: string }>(
  count: number,
  make: (i: number) => Promise<T>,
): Promise<(T & { shard: number })[]> {
  const found = new Map<number, T & { shard: number }>();
  for (let i = 0; found.size < count && i < 40; i++) {
    const tenant = await make(i);
    const shard = await shardOf(tenant.tenantId, 4);
    if (!found.has(shard)) found.set(shard, { ...tenant, shard });
  }
  expect(found.size).toBe(count);
  return [...found.values()];
}

/** `count` messages of the tenant, handed to the feed in one statement (as accepting does). */
async function queueMessages(tenant: Shop, contactId: string, count: number): Promise<void> {
  await storeMessageRows(
    env.deps.db,
    Array.from({ length: count }, () => ({
      tenantId: tenant.tenantId,
      senderId: tenant.sender.id,
      contactId,
    })),
  );
}

/** The tenant's feed positions are 1..n, each message once. */
async function expectContiguous(tenantId: string, n: number): Promise<void> {
  const { rows } = await sql<{ entries: number; distinct_messages: number; max_seq: number }>`
    SELECT count(*)::int AS entries, count(DISTINCT message_id)::int AS distinct_messages, coalesce(max(seq), 0)::int AS max_seq
    FROM feed_entries WHERE tenant_id = ${tenantId}`.execute(env.deps.db);
  expect(rows[0]).toEqual({ entries: n, distinct_messages: n, max_seq: n });
}

describe("feed shards", () => {
  test("the count only grows; rows queued before a growth keep their shard and are numbered", async () => {
    const tenant = await createShop(env, "Before growth");
    const contact = await insertContact(env, tenant, "+4915100090001");
    expect(await ensureFeedShards(env.deps.db, 1)).toBe(1);
    await queueMessages(tenant, contact.id, 30);

    expect(await ensureFeedShards(env.deps.db, 4)).toBe(4);
    // Lowering is refused: a row queued in shard 3 would have no sequencer.
    expect(await ensureFeedShards(env.deps.db, 2)).toBe(4);
    await queueMessages(tenant, contact.id, 20);
    const { rows } = await sql<{ shard: number; rows: number }>`
      SELECT shard, count(*)::int AS rows FROM feed_pending GROUP BY shard ORDER BY shard`.execute(
      env.deps.db,
    );
    const home = await shardOf(tenant.tenantId, 4);
    expect(rows).toEqual(
      home === 0
        ? [{ shard: 0, rows: 50 }]
        : [
            { shard: 0, rows: 30 },
            { shard: home, rows: 20 },
          ],
    );
    expect(await feedOldestPendingAgeSeconds(env.deps.db)).toBeGreaterThanOrEqual(0);

    // Two sequencers at once, while the tenant has rows in two shards: one position each, no gap.
    await Promise.all([sequenceFeed(env.deps.db), sequenceFeed(env.deps.db)]);
    while ((await sequenceFeed(env.deps.db)).taken > 0);
    expect(await feedPendingCount(env.deps.db)).toBe(0);
    await expectContiguous(tenant.tenantId, 50);
  });

  test("a shard whose lock is held waits; the other shards are numbered meanwhile", async () => {
    const [held, free] = await inDistinctShards(2, async (i) => {
      const tenant = await createShop(env, `Shard ${i}`);
      const contact = await insertContact(env, tenant, `+49151000911${String(i).padStart(2, "0")}`);
      return { ...tenant, contactId: contact.id };
    });
    for (const tenant of [held!, free!]) await queueMessages(tenant, tenant.contactId, 10);

    const holder = createDb(env.config.databaseUrl, { max: 1 });
    try {
      await holder.transaction().execute(async (trx) => {
        await sql`SELECT pg_advisory_xact_lock(${ADVISORY_LOCKS.feedSequencer}::int, ${held!.shard}::int)`.execute(
          trx,
        );
        expect(await sequenceFeed(env.deps.db)).toMatchObject({ ran: true, taken: 10, numbered: 10 });
        await expectContiguous(free!.tenantId, 10);
        await expectContiguous(held!.tenantId, 0);
      });
    } finally {
      await holder.destroy();
    }
    expect(await sequenceFeed(env.deps.db)).toMatchObject({ ran: true, taken: 10, numbered: 10 });
    await expectContiguous(held!.tenantId, 10);
  });

  test("lost nothing with 4 shards: 16 writers, 3 tenants, 6 readers, 4 sequencer loops", async () => {
    const tenants = await inDistinctShards(3, (i) =>
      lostNothingTenant(env, `Lost shard ${i}`, `+49151000920${String(i).padStart(2, "0")}`),
    );
    const report = await expectLostNothing(env, {
      tenants,
      writers: 16,
      messagesPerWriter: 30,
      readersPerTenant: 2,
      rollbackRate: 0.15,
      maxDelayMs: 15,
      sequencers: 4,
      shards: 4,
    });
    expect(report.readers).toHaveLength(6);
  }, 120_000);
});
