/**
 * Issue 42, item 6: reads of the event log are bounded. GET /v2/events?types=… examines at most
 * EVENT_SCAN_ROWS positions a call and its cursor moves past them (an empty page too), so a poller of
 * rare types steps through a long log instead of reading all of it on every call; a webhook
 * endpoint's `delivery.pending` is counted from positions, not by counting the log. Item 9 (part): a
 * cursor of one log given to the other is named for what it is.
 */
import { describe, expect, test } from "bun:test";
import { sql } from "kysely";
import { createEventCursorCodec } from "../../src/events/cursor.ts";
import { EVENT_SCAN_ROWS, eventHead } from "../../src/events/repository.ts";
import { currentFeedEpoch } from "../../src/feed/repository.ts";
import { deliveryCountsStatement, PENDING_SAMPLE_ROWS } from "../../src/push/repository.ts";
import { appendLogEvents } from "../support/fixtures.ts";
import { type CallResult, call, expectApiError } from "../support/index.ts";
import { useWorld } from "../support/world.ts";

const world = useWorld();

/** `count` events of `type` (or of `types` in turn) in the shop's log; the last position. */
const appendEvents = (type: string | string[], count: number) =>
  appendLogEvents(world.env.deps.db, world.shop, type, count);

function events(query: string): Promise<CallResult> {
  return call(world.env.app, "GET", `/v2/events${query}`, { token: world.shop.token });
}

const positionOf = (cursor: string) =>
  createEventCursorCodec(world.env.deps.config).decode(world.shop.tenantId, cursor)?.seq;

/** A cursor at the head of the tenant's log: where a poller that has read everything stands. */
async function headCursor(): Promise<string> {
  const head = await eventHead(world.env.deps.db, world.shop.tenantId);
  const epoch = await currentFeedEpoch(world.env.deps.db);
  return createEventCursorCodec(world.env.deps.config).encode(world.shop.tenantId, { epoch, seq: head });
}

const idsOf = (page: CallResult) => (page.body.data as { id: string }[]).map((event) => event.id);

describe("GET /v2/events?types=…", () => {
  test("an empty page's next_cursor moves past the positions it examined", async () => {
    const head = await appendEvents("message.sent", 10);
    const page = await events("?types=message.received");
    expect(page.status).toBe(200);
    expect(page.body.data).toEqual([]);
    expect(page.body.has_more).toBe(false);
    expect(positionOf(page.body.next_cursor)).toBe(head);
    // From there the next call sees only what came after, the matching event included.
    await appendEvents("message.sent", 3);
    const received = await appendEvents("message.received", 1);
    const next = await events(`?types=message.received&since=${page.body.next_cursor}`);
    expect(next.body.data).toHaveLength(1);
    expect(next.body.data[0].type).toBe("message.received");
    expect(positionOf(next.body.next_cursor)).toBe(received);
  });

  test("a call examines at most EVENT_SCAN_ROWS positions: a long run of other types takes a few calls, and nothing is skipped", async () => {
    const start = await headCursor();
    const first = await appendEvents("message.read", 1);
    await appendEvents("message.sent", 2 * EVENT_SCAN_ROWS + 10);
    const second = await appendEvents("message.read", 1);

    const pages: CallResult[] = [];
    let cursor = start;
    for (let calls = 0; calls < 10; calls++) {
      const page = await events(`?types=message.read&since=${cursor}`);
      pages.push(page);
      cursor = page.body.next_cursor;
      if (!page.body.has_more) break;
    }
    // The first call stopped EVENT_SCAN_ROWS positions on, with the first event and has_more.
    expect(pages[0]?.body.data.map((e: { type: string }) => e.type)).toEqual(["message.read"]);
    expect(pages[0]?.body.has_more).toBe(true);
    expect(positionOf(pages[0]?.body.next_cursor)).toBe(first - 1 + EVENT_SCAN_ROWS);
    // Three calls of EVENT_SCAN_ROWS positions each reach the second; the cursor ends at it.
    expect(pages).toHaveLength(3);
    expect(pages.flatMap(idsOf)).toHaveLength(2);
    expect(positionOf(cursor)).toBe(second);
    expect((await events(`?types=message.read&since=${cursor}`)).body).toMatchObject({
      data: [],
      has_more: false,
      next_cursor: cursor,
    });
  });

  test("a full page ends at its last event, not at the positions it examined past it", async () => {
    const start = await headCursor();
    await appendEvents("message.delivered", 5);
    await appendEvents("message.sent", 20);
    const first = await events(`?types=message.delivered&limit=3&since=${start}`);
    expect(first.body.data).toHaveLength(3);
    expect(first.body.has_more).toBe(true);
    const rest = await events(`?types=message.delivered&limit=3&since=${first.body.next_cursor}`);
    expect(rest.body.data).toHaveLength(2);
    expect(rest.body.has_more).toBe(false);
    const all = await events(`?types=message.delivered&since=${start}`);
    expect([...idsOf(first), ...idsOf(rest)]).toEqual(idsOf(all));
  });

  test("positions retention removed are not stepped through: a call examines the next positions that exist", async () => {
    const start = await headCursor();
    await appendEvents("message.sent", EVENT_SCAN_ROWS * 3);
    const kept = await appendEvents("message.failed", 1);
    // Retention takes a tenant's log oldest first: everything but the last event goes.
    await world.env.deps.db
      .deleteFrom("events")
      .where("tenant_id", "=", world.shop.tenantId)
      .where("seq", "<", kept)
      .execute();
    const page = await events(`?types=message.failed&since=${start}`);
    expect(page.body.data).toHaveLength(1);
    expect(page.body.has_more).toBe(false);
  });
});

describe("a cursor of the other log", () => {
  test("a feed cursor given to /v2/events is named as one; an event cursor given to /v2/messages too", async () => {
    const feedCursor = (await call(world.env.app, "GET", "/v2/messages", { token: world.shop.token })).body
      .next_cursor;
    const eventCursor = (await events("")).body.next_cursor;
    expect(feedCursor).toMatch(/^fd_/);
    expect(eventCursor).toMatch(/^evc_/);

    const onEvents = await events(`?since=${feedCursor}`);
    expectApiError(onEvents, 400, "parameter_invalid", "since");
    expect(onEvents.body.error.message).toBe(
      "since is a feed cursor (fd_…, the next_cursor of GET /v2/messages); since here takes an event cursor (evc_…): the next_cursor of GET /v2/events, or a webhook endpoint's delivery.cursor.",
    );
    const onFeed = await call(world.env.app, "GET", `/v2/messages?since=${eventCursor}`, {
      token: world.shop.token,
    });
    expectApiError(onFeed, 400, "parameter_invalid", "since");
    expect(onFeed.body.error.message).toBe(
      "since is an event cursor (evc_…, the next_cursor of GET /v2/events, or a webhook endpoint's delivery.cursor); since here takes a feed cursor (fd_…): the next_cursor of GET /v2/messages.",
    );
    // A cursor of the right kind that is not this account's still says so.
    const theirs = await call(world.env.app, "GET", "/v2/events", { token: world.other.token });
    const foreign = await events(`?since=${theirs.body.next_cursor}`);
    expectApiError(foreign, 400, "parameter_invalid", "since");
    expect(foreign.body.error.message).toBe(
      "since is not an event cursor this service gave this account; pass the next_cursor of GET /v2/events, or a webhook endpoint's delivery.cursor.",
    );
  });
});

describe("a webhook endpoint's delivery counts", () => {
  const endpointUrl = "http://127.0.0.1:9/hooks";

  async function createEndpoint(events?: string[]): Promise<string> {
    const created = await call(world.env.app, "POST", "/v2/webhook_endpoints", {
      token: world.shop.token,
      body: { url: endpointUrl, ...(events && { events }) },
    });
    expect(created.status).toBe(201);
    return created.body.id;
  }

  async function delivery(id: string): Promise<{ pending: number; oldest_pending_age: number | null }> {
    const got = await call(world.env.app, "GET", `/v2/webhook_endpoints/${id}`, { token: world.shop.token });
    expect(got.status).toBe(200);
    return got.body.delivery;
  }

  /** Acknowledged out of order, as a delivery run writes it (src/push/delivery-store.ts). */
  async function acknowledge(endpointId: string, seqs: number[]): Promise<void> {
    await world.env.deps.db
      .insertInto("webhook_deliveries")
      .values(seqs.map((seq) => ({ endpoint_id: endpointId, seq, acknowledged: true })))
      .execute();
  }

  /** Rows of the event log an EXPLAIN ANALYZE of the endpoints' counts read (every loop of every scan). */
  async function eventRowsRead(ids: string[]): Promise<number> {
    type PlanNode = {
      "Relation Name"?: string;
      "Actual Rows": number;
      "Actual Loops": number;
      Plans?: PlanNode[];
    };
    const { rows } = await sql<{ "QUERY PLAN": { Plan: PlanNode }[] }>`
      EXPLAIN (ANALYZE, FORMAT JSON) ${deliveryCountsStatement(ids)}`.execute(world.env.deps.db);
    const walk = (node: PlanNode): number =>
      (node["Relation Name"]?.startsWith("events") ? node["Actual Rows"] * node["Actual Loops"] : 0) +
      (node.Plans ?? []).reduce((sum, child) => sum + walk(child), 0);
    return walk(rows[0]?.["QUERY PLAN"][0]?.Plan as PlanNode);
  }

  test("pending is right after appends, acknowledgements, a cursor that moves and a replay, and read in bounded time", async () => {
    const all = await createEndpoint();
    const reads = await createEndpoint(["message.read"]);
    expect(await delivery(all)).toMatchObject({ pending: 0, oldest_pending_age: null });
    expect(await delivery(reads)).toMatchObject({ pending: 0, oldest_pending_age: null });

    // Three times the positions an endpoint read looks at, every other one a message.read.
    const backlog = 3 * PENDING_SAMPLE_ROWS;
    const head = await appendEvents(["message.sent", "message.read"], backlog);
    expect(await delivery(all)).toMatchObject({ pending: backlog, oldest_pending_age: expect.any(Number) });
    expect(await delivery(reads)).toMatchObject({
      pending: backlog / 2,
      oldest_pending_age: expect.any(Number),
    });

    // However long the backlog, the read looks at PENDING_SAMPLE_ROWS positions of each endpoint.
    await appendEvents("message.sent", 5 * PENDING_SAMPLE_ROWS);
    const rowsRead = await eventRowsRead([all, reads]);
    expect(rowsRead).toBeLessThanOrEqual(2 * (PENDING_SAMPLE_ROWS + 1));
    expect(rowsRead).toBeGreaterThanOrEqual(2 * PENDING_SAMPLE_ROWS);
    const longHead = await eventHead(world.env.deps.db, world.shop.tenantId);
    expect((await delivery(all)).pending).toBe(backlog + 5 * PENDING_SAMPLE_ROWS);

    // Acknowledged out of order: 10 among the positions looked at, 5 past them.
    const start = head - backlog;
    await acknowledge(all, [
      ...Array.from({ length: 10 }, (_, i) => start + 1 + i),
      ...Array.from({ length: 5 }, (_, i) => longHead - i),
    ]);
    expect((await delivery(all)).pending).toBe(backlog + 5 * PENDING_SAMPLE_ROWS - 15);

    // The cursor moves as a run writes its progress: 100 positions behind the head are left.
    await world.env.deps.db
      .updateTable("webhook_endpoints")
      .set({ cursor_seq: longHead - 100 })
      .where("id", "=", all)
      .execute();
    await world.env.deps.db
      .deleteFrom("webhook_deliveries")
      .where("endpoint_id", "=", all)
      .where("seq", "<=", longHead - 100)
      .execute();
    expect((await delivery(all)).pending).toBe(95);

    // A replay from the oldest retained event: the positions retention took (the earlier tests'
    // first ones) are not pending.
    const replay = await call(world.env.app, "POST", `/v2/webhook_endpoints/${all}/replay`, {
      token: world.shop.token,
      body: { since: null },
    });
    expect(replay.status).toBe(200);
    const kept = await world.env.deps.db
      .selectFrom("events")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("tenant_id", "=", world.shop.tenantId)
      .executeTakeFirstOrThrow();
    expect(Number(kept.n)).toBeLessThan(longHead);
    expect(replay.body.delivery.pending).toBe(Number(kept.n));
    expect((await delivery(all)).pending).toBe(Number(kept.n));
  });
});
