import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import { createDb } from "../../src/db/connect.ts";
import { ADVISORY_LOCKS } from "../../src/db/locks.ts";
import { createFeedCursorCodec } from "../../src/feed/cursor.ts";
import { feedOldestPendingAgeSeconds, feedPendingCount } from "../../src/feed/metrics.ts";
import { sequenceFeed } from "../../src/feed/sequencer.ts";
import { createShop, customerWrites, receive, type Shop, storeMessageRows } from "../support/fixtures.ts";
import {
  call,
  createTestEnv,
  eventually,
  expectApiError,
  expectScopeRequired,
  spawnWorker,
  type TestEnv,
} from "../support/index.ts";
import {
  epoch,
  expectLimitBounds,
  expectLostNothing,
  insertContact,
  insertOutbound,
  lostNothingTenant,
} from "../support/reading.ts";

let env: TestEnv;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { token: 1000 } });
});
afterAll(() => env.close());

interface FeedBody {
  object: "list";
  url: string;
  has_more: boolean;
  data: ({ id: string | null; text: string | null } & Record<string, unknown>)[];
  next_cursor: string;
}

async function feed(tenant: { token: string }, query = ""): Promise<{ status: number; body: FeedBody }> {
  const result = await call(env.app, "GET", `/v2/messages${query}`, { token: tenant.token });
  return { status: result.status, body: result.body };
}

/** Numbers everything pending, as the workers' loops would. */
async function sequenceAll(): Promise<void> {
  while ((await sequenceFeed(env.deps.db)).taken > 0);
}

const CURSOR = /^fd_[0-9A-Za-z]{36}$/;

describe("GET /messages", () => {
  test("FeedMessage: inbound and outbound, every field, with the contact; system notices never", async () => {
    const shop = await createShop(env, "Feed shop");
    const t0 = epoch(env.clock.now()) - 600;
    const text = await receive(env, shop, {
      from: "4915100070001",
      type: "text",
      text: "Where is\nmy order?",
      timestamp: t0,
    });
    await receive(env, shop, {
      from: "4915100070001",
      type: "system",
      text: "changed number",
      timestamp: t0 + 1,
    });
    const document = await receive(env, shop, {
      from: "4915100070002",
      type: "document",
      filename: "receipt.pdf",
      caption: "receipt",
      timestamp: t0 + 2,
    });
    const failure = { code: "provider_unavailable", message: "Try again later.", retryable: true } as const;
    const failed = await insertOutbound(env, shop, {
      contactId: text.contactId,
      type: "template",
      text: "Hi Ana, your order 7 has shipped.",
      status: "failed",
      failure,
      createdAt: new Date((t0 + 3) * 1000),
    });
    await sequenceAll();

    const result = await feed(shop);
    expect(result.status).toBe(200);
    // The BSUID the provider named each customer by (the simulator derives one from the phone).
    const userIds = new Map(
      (await env.deps.db.selectFrom("contacts").select(["id", "user_id"]).execute()).map((row) => [
        row.id,
        row.user_id,
      ]),
    );
    const contact = (id: string, phone: string) => ({
      object: "contact",
      id,
      phone,
      user_id: userIds.get(id) ?? null,
      parent_user_id: null,
      username: null,
    });
    expect(result.body).toEqual({
      object: "list",
      url: "/v2/messages",
      has_more: false,
      data: [
        {
          object: "message",
          id: text.messageId,
          direction: "inbound",
          type: "text",
          preview: "Where is\nmy order?",
          text: "Where is\nmy order?",
          media: null,
          status: null,
          failure: null,
          client_reference: null,
          created: t0,
          contact: contact(text.contactId, "+4915100070001"),
        },
        {
          object: "message",
          id: document.messageId,
          direction: "inbound",
          type: "document",
          preview: "[document: receipt.pdf]",
          text: "receipt",
          media: { type: "document", filename: "receipt.pdf" },
          status: null,
          failure: null,
          client_reference: null,
          created: t0 + 2,
          contact: contact(document.contactId, "+4915100070002"),
        },
        {
          object: "message",
          id: failed,
          direction: "outbound",
          type: "template",
          preview: "Hi Ana, your order 7 has shipped.",
          text: "Hi Ana, your order 7 has shipped.",
          media: null,
          status: "failed",
          failure,
          client_reference: null,
          created: t0 + 3,
          contact: contact(text.contactId, "+4915100070001"),
        },
      ],
      next_cursor: expect.stringMatching(CURSOR),
    });
  });

  test("a message is withheld until it has a position, then appears after the cursor", async () => {
    const shop = await createShop(env, "Withheld");
    const empty = await feed(shop);
    expect(empty.body).toEqual({
      object: "list",
      url: "/v2/messages",
      has_more: false,
      data: [],
      next_cursor: expect.stringMatching(CURSOR),
    });
    const start = empty.body.next_cursor;
    const received = await receive(env, shop, { from: "4915100071001", type: "text", text: "first" });
    const before = await feed(shop, `?since=${start}`);
    // Not yet numbered: nothing, and the cursor stays where it was.
    expect(before.body).toMatchObject({ has_more: false, data: [], next_cursor: start });
    await sequenceAll();
    const after = await feed(shop, `?since=${start}`);
    expect(after.body.data.map((m) => m.id)).toEqual([received.messageId]);
    expect(after.body.next_cursor).not.toBe(start);
    const caughtUp = await feed(shop, `?since=${after.body.next_cursor}`);
    expect(caughtUp.body).toMatchObject({ has_more: false, data: [], next_cursor: after.body.next_cursor });
  });

  test("limit pages with has_more; next_cursor chains pages without gaps or repeats", async () => {
    const shop = await createShop(env, "Paging");
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(
        (await receive(env, shop, { from: `49151000720${10 + i}`, type: "text", text: `m${i}` })).messageId,
      );
      // Separate ticks, as messages finalized at different times get.
      await sequenceAll();
    }
    const pages: { ids: (string | null)[]; has_more: boolean }[] = [];
    let since = "";
    for (;;) {
      const page = await feed(shop, `?limit=2${since}`);
      pages.push({ ids: page.body.data.map((m) => m.id), has_more: page.body.has_more });
      since = `&since=${page.body.next_cursor}`;
      if (!page.body.has_more) break;
    }
    expect(pages).toEqual([
      { ids: ids.slice(0, 2), has_more: true },
      { ids: ids.slice(2, 4), has_more: true },
      { ids: ids.slice(4), has_more: false },
    ]);
    const later = await receive(env, shop, { from: "4915100072099", type: "text", text: "later" });
    await sequenceAll();
    expect((await feed(shop, `?limit=2${since}`)).body.data.map((m) => m.id)).toEqual([later.messageId]);
  });

  test("outbound messages appear in the feed too, when their accept transaction hands them off", async () => {
    const shop = await createShop(env, "Outbound");
    const contact = await insertContact(env, shop, "+4915100073001");
    const sent = await insertOutbound(env, shop, { contactId: contact.id, createdAt: env.clock.now() });
    await sequenceAll();
    expect((await feed(shop)).body.data).toEqual([
      expect.objectContaining({
        id: sent,
        direction: "outbound",
        status: "accepted",
        contact: {
          object: "contact",
          id: contact.id,
          phone: "+4915100073001",
          user_id: null,
          parent_user_id: null,
          username: null,
        },
      }),
    ]);
  });
});

describe("parameters", () => {
  let shop: Shop;
  let other: Shop;

  beforeAll(async () => {
    shop = await createShop(env, "Params");
    other = await createShop(env, "Params other");
    for (let i = 0; i < 3; i++)
      await receive(env, shop, { from: `49151000740${10 + i}`, type: "text", text: `p${i}` });
    await receive(env, other, { from: "4915100074010", type: "text", text: "theirs" });
    await sequenceAll();
  });

  test("limit 1 and 500 are accepted; 0, 501, a fraction and text are 400 naming limit; default 100", async () => {
    const list = (query: string) => call(env.app, "GET", `/v2/messages${query}`, { token: shop.token });
    await expectLimitBounds(list, 500, 3, ["0", "501", "1.5", "many", ""]);
  });

  test("the default page is 100", async () => {
    const busy = await createShop(env, "Busy");
    const contact = await insertContact(env, busy, "+4915100075001");
    for (let i = 0; i < 101; i++)
      await insertOutbound(env, busy, { contactId: contact.id, createdAt: env.clock.now() });
    await sequenceAll();
    const page = await feed(busy);
    expect(page.body.data).toHaveLength(100);
    expect(page.body.has_more).toBe(true);
  });

  test("since: garbage, a tampered cursor, and another tenant's cursor are 400 naming since", async () => {
    const cursor = (await feed(shop, "?limit=1")).body.next_cursor;
    const theirs = (await feed(other)).body.next_cursor;
    const flip = (value: string, at: number) =>
      value.slice(0, at) + (value[at] === "A" ? "B" : "A") + value.slice(at + 1);
    for (const since of [
      "garbage",
      "fd_",
      "",
      `${cursor}x`,
      cursor.toLowerCase(),
      flip(cursor, 12), // the position
      flip(cursor, 30), // the MAC
      theirs,
      createFeedCursorCodec("another-secret-of-at-least-32-characters").encode(shop.tenantId, {
        epoch: 1,
        seq: 0,
      }),
    ]) {
      expectApiError(
        await call(env.app, "GET", `/v2/messages?since=${encodeURIComponent(since)}`, { token: shop.token }),
        400,
        "parameter_invalid",
        "since",
      );
    }
  });

  test("each tenant's feed holds only its own messages, numbered from its own start", async () => {
    const mine = (await feed(shop)).body.data.map((m) => m.text);
    const theirs = (await feed(other)).body.data.map((m) => m.text);
    expect(mine).toEqual(["p0", "p1", "p2"]);
    expect(theirs).toEqual(["theirs"]);
    const positions = await env.deps.db
      .selectFrom("feed_entries")
      .select("seq")
      .where("tenant_id", "=", other.tenantId)
      .execute();
    expect(positions.map((p) => p.seq)).toEqual([1]);
  });

  test("needs messaging:read", async () => {
    await expectScopeRequired(env, "messaging:read", [["GET", "/v2/messages"]]);
  });
});

describe("feed epoch", () => {
  test("bump-epoch (operator CLI): older cursors restart at 0 — duplicates, never loss", async () => {
    const shop = await createShop(env, "Epoch");
    const first = await receive(env, shop, { from: "4915100076001", type: "text", text: "one" });
    const second = await receive(env, shop, { from: "4915100076002", type: "text", text: "two" });
    await sequenceAll();
    const page = await feed(shop);
    const oldCursor = page.body.next_cursor;

    const proc = Bun.spawn(["bun", "src/cli/index.ts", "feed", "bump-epoch"], {
      env: {
        ...process.env,
        NODE_ENV: "development",
        DATABASE_URL: env.config.databaseUrl,
        LOG_LEVEL: "silent",
      },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [code, stdout] = await Promise.all([proc.exited, new Response(proc.stdout).text()]);
    expect(code).toBe(0);
    const bumped = JSON.parse(stdout);
    expect(bumped).toEqual({ object: "feed_epoch", epoch: expect.any(Number) });
    expect(bumped.epoch).toBeGreaterThan(1);

    const again = await feed(shop, `?since=${oldCursor}`);
    expect(again.body.data.map((m) => m.id)).toEqual([first.messageId, second.messageId]);
    expect(again.body.next_cursor).not.toBe(oldCursor);
    const caughtUp = await feed(shop, `?since=${again.body.next_cursor}`);
    expect(caughtUp.body.data).toEqual([]);
    // An empty page in the new epoch hands out a cursor of the new epoch.
    const empty = await createShop(env, "Epoch empty");
    const stale = createFeedCursorCodec(env.config.jwtSecret).encode(empty.tenantId, { epoch: 1, seq: 0 });
    const fresh = await feed(empty, `?since=${stale}`);
    expect(fresh.body).toMatchObject({ data: [], has_more: false });
    expect(fresh.body.next_cursor).toBe((await feed(empty)).body.next_cursor);
  });
});

describe("sequencer", () => {
  test("numbers per tenant contiguously; drops already-numbered and system hand-offs; metrics", async () => {
    const a = await createShop(env, "Seq A");
    const b = await createShop(env, "Seq B");
    await sequenceAll();
    expect(await feedPendingCount(env.deps.db)).toBe(0);
    expect(await feedOldestPendingAgeSeconds(env.deps.db)).toBe(0);

    const contactA = await insertContact(env, a, "+4915100077001");
    const contactB = await insertContact(env, b, "+4915100077002");
    for (let i = 0; i < 4; i++) {
      await insertOutbound(env, a, { contactId: contactA.id, createdAt: env.clock.now() });
      await insertOutbound(env, b, { contactId: contactB.id, createdAt: env.clock.now() });
    }
    expect(await feedPendingCount(env.deps.db)).toBe(8);
    await Bun.sleep(30);
    expect(await feedOldestPendingAgeSeconds(env.deps.db)).toBeGreaterThan(0.02);

    const tick = await sequenceFeed(env.deps.db);
    expect(tick).toMatchObject({ ran: true, taken: 8, numbered: 8 });
    const positions = async (tenantId: string) =>
      (
        await env.deps.db
          .selectFrom("feed_entries")
          .select("seq")
          .where("tenant_id", "=", tenantId)
          .orderBy("seq")
          .execute()
      ).map((row) => row.seq);
    expect(await positions(a.tenantId)).toEqual([1, 2, 3, 4]);
    expect(await positions(b.tenantId)).toEqual([1, 2, 3, 4]);

    // A hand-off for a message already numbered, and one for a system message, are dropped.
    const numbered = await env.deps.db
      .selectFrom("feed_entries")
      .select("message_id")
      .where("tenant_id", "=", a.tenantId)
      .executeTakeFirstOrThrow();
    const system = await receive(env, a, { from: "4915100077003", type: "system", text: "changed" });
    await env.deps.db
      .insertInto("feed_pending")
      .values([
        { message_id: numbered.message_id, tenant_id: a.tenantId },
        { message_id: system.messageId, tenant_id: a.tenantId },
      ])
      .execute();
    await insertOutbound(env, a, { contactId: contactA.id, createdAt: env.clock.now() });
    expect(await sequenceFeed(env.deps.db)).toMatchObject({ ran: true, taken: 3, numbered: 1 });
    expect(await positions(a.tenantId)).toEqual([1, 2, 3, 4, 5]);
    expect(await feedPendingCount(env.deps.db)).toBe(0);
  });

  test("a second sequencer waits its turn instead of numbering beside the first", async () => {
    const holder = createDb(env.config.databaseUrl, { max: 1 });
    try {
      await holder.transaction().execute(async (trx) => {
        // Shard 0's lock, the only shard here.
        await sql`SELECT pg_advisory_xact_lock(${ADVISORY_LOCKS.feedSequencer}::int, 0)`.execute(trx);
        expect(await sequenceFeed(env.deps.db)).toEqual({
          ran: false,
          taken: 0,
          numbered: 0,
          events: 0,
          eventTenants: [],
        });
      });
      expect((await sequenceFeed(env.deps.db)).ran).toBe(true);
    } finally {
      await holder.destroy();
    }
  });
});

describe("lost nothing (DESIGN §6)", () => {
  test("8 writers, slow and rolling back, 2 tenants, 4 readers: every committed message seen, in one order", async () => {
    const tenants = [
      await lostNothingTenant(env, "Lost A", "+4915100078001"),
      await lostNothingTenant(env, "Lost B", "+4915100078002"),
    ];
    await expectLostNothing(env, {
      tenants,
      writers: 8,
      messagesPerWriter: 60,
      readersPerTenant: 2,
      rollbackRate: 0.15,
      maxDelayMs: 15,
      sequencers: 2,
    });
  });
});

describe("worker processes", () => {
  test("a finalize worker puts a webhook's message in the feed by itself", async () => {
    const shop = await createShop(env, "Worker path");
    const worker = spawnWorker(env, "finalize");
    try {
      await customerWrites(env, shop.phoneNumberId, {
        from: "4915100079001",
        type: "text",
        text: "via worker",
      });
      const seen = await eventually(async () => {
        const page = await feed(shop);
        return page.body.data.length > 0 ? page.body.data : undefined;
      });
      expect(seen.map((m) => m.text)).toEqual(["via worker"]);
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  });

  test("killed mid-tick, then two at once: every message numbered once, no gap, no duplicate", async () => {
    const db = env.deps.db;
    const tenants = [await createShop(env, "Crash A"), await createShop(env, "Crash B")];
    const contacts = [
      await insertContact(env, tenants[0]!, "+4915100080001"),
      await insertContact(env, tenants[1]!, "+4915100080002"),
    ];
    const total = 24_000;
    // Written in batches of 2,000 (one statement each), half for each tenant.
    for (let from = 0; from < total; from += 2000) {
      await storeMessageRows(
        db,
        Array.from({ length: 2000 }, (_, i) => {
          const t = (from + i) % 2;
          return {
            tenantId: tenants[t]!.tenantId,
            senderId: tenants[t]!.sender.id,
            contactId: contacts[t]!.id,
            text: "bulk",
          };
        }),
      );
    }

    // Kill the first worker while its sequencer statement is running (before its commit). The
    // statement is held mid-way: a transaction of ours inserts tenant A's feed head first, so the
    // worker's upsert of that head waits for it (a statement left to itself is over too soon to
    // be caught reliably).
    const holder = createDb(env.config.databaseUrl, { max: 1 });
    let caught: { pid: number };
    try {
      caught = await holder.transaction().execute(async (trx) => {
        // A head at 0 is no head: committed afterwards, it changes no position.
        await sql`INSERT INTO feed_heads (tenant_id, last_seq) VALUES (${tenants[0]!.tenantId}, 0)`.execute(
          trx,
        );
        const doomed = spawnWorker(env, "finalize");
        try {
          return await eventually(async () => {
            const running = await sql<{ pid: number }>`
              SELECT pid FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'messaging-finalize'
                AND state = 'active' AND wait_event_type = 'Lock' AND query LIKE '%DELETE FROM feed_pending%'`.execute(
              db,
            );
            return running.rows[0];
          }, 15_000);
        } finally {
          // Killed whether or not it was caught: a test that fails here leaves no worker behind.
          await doomed.stop("SIGKILL");
        }
      });
    } finally {
      await holder.destroy();
    }
    // Its backend finds the client gone and rolls the tick back.
    await eventually(async () => {
      const alive = await sql`SELECT 1 FROM pg_stat_activity WHERE pid = ${caught.pid}`.execute(db);
      return alive.rows.length === 0;
    }, 15_000);

    const twins = [spawnWorker(env, "finalize"), spawnWorker(env, "status")];
    try {
      await eventually(async () => (await feedPendingCount(db)) === 0, 45_000);
    } finally {
      for (const twin of twins) expect(await twin.stop()).toBe(0);
    }

    for (const tenant of tenants) {
      const row = await sql<{
        entries: number;
        distinct_messages: number;
        min_seq: number;
        max_seq: number;
        head: number;
      }>`
        SELECT count(*)::int AS entries, count(DISTINCT message_id)::int AS distinct_messages,
               min(seq)::int AS min_seq, max(seq)::int AS max_seq,
               (SELECT last_seq FROM feed_heads WHERE tenant_id = ${tenant.tenantId})::int AS head
        FROM feed_entries WHERE tenant_id = ${tenant.tenantId}`.execute(db);
      expect(row.rows[0]).toEqual({
        entries: total / 2,
        distinct_messages: total / 2,
        min_seq: 1,
        max_seq: total / 2,
        head: total / 2,
      });
    }
  }, 90_000);
});
