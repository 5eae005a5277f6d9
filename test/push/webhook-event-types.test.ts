/**
 * Issue 42 follow-ups. An endpoint created without `events` receives every type, new ones included
 * (DESIGN §12): "every type" is a state of its own (events null), not the list of types there were
 * when it was created; PATCH `events` sets a list and `events: null` returns to every type; sql/031
 * turns a stored list of every current type into that state. A delivery run's read of the log is
 * bounded like GET /events?types=: an endpoint filtering a rare type reads a range of positions per
 * read, and its run still reaches the rare event and moves its cursor to the head.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { sql } from "kysely";
import { eventHead } from "../../src/events/repository.ts";
import { EVENT_TYPES } from "../../src/events/schemas.ts";
import { deliverEndpoint } from "../../src/push/delivery.ts";
import { RUN_SCAN_POSITIONS, unacknowledgedEvents } from "../../src/push/delivery-store.ts";
import { deliveryCounts, type EndpointRow } from "../../src/push/repository.ts";
import { appendLogEvents } from "../support/fixtures.ts";
import { call, expectApiError } from "../support/index.ts";
import { useWorld } from "../support/world.ts";

const world = useWorld();

/** A type this service does not have yet: stands for one added after an endpoint was created. */
const NEW_TYPE = "budget.threshold_reached";

/** `count` events of `type` (or of `types` in turn) in the shop's log; the last position. */
const appendEvents = (type: string | string[], count: number) =>
  appendLogEvents(world.env.deps.db, world.shop, type, count);

async function storedRow(id: string): Promise<EndpointRow> {
  return world.env.deps.db
    .selectFrom("webhook_endpoints")
    .selectAll()
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
}

function patch(id: string, body: unknown) {
  return call(world.env.app, "PATCH", `/v2/webhook_endpoints/${id}`, { token: world.shop.token, body });
}

async function create(body: Record<string, unknown>) {
  const created = await call(world.env.app, "POST", "/v2/webhook_endpoints", {
    token: world.shop.token,
    body: { url: "http://127.0.0.1:9/hooks", ...body },
  });
  expect(created.status).toBe(201);
  return created.body;
}

/** The types of the events a delivery run of the endpoint would read now, from its cursor. */
async function typesARunReads(id: string): Promise<string[]> {
  const row = await storedRow(id);
  const read = await unacknowledgedEvents(world.env.deps.db, row, row.cursor_seq, 1000);
  return read.rows.map((event) => event.event_type);
}

describe("an endpoint of every type", () => {
  test("created without events: stored as every type, shown with today's types; a type added later is delivered and pending", async () => {
    const endpoint = await create({});
    expect(endpoint.all_events).toBe(true);
    expect(endpoint.events).toEqual([...EVENT_TYPES]);
    expect((await storedRow(endpoint.id)).events).toBeNull();
    const listed = await create({ events: ["message.read"] });
    expect(listed.all_events).toBe(false);

    // A type that is not in today's list (it stands for one added after the endpoint was made).
    await appendEvents([NEW_TYPE, "message.read"], 2);
    expect(await typesARunReads(endpoint.id)).toEqual([NEW_TYPE, "message.read"]);
    expect(await typesARunReads(listed.id)).toEqual(["message.read"]);
    const counts = await deliveryCounts(world.env.deps.db, [
      await storedRow(endpoint.id),
      await storedRow(listed.id),
    ]);
    expect(counts.get(endpoint.id)?.pending).toBe(2);
    expect(counts.get(listed.id)?.pending).toBe(1);
    const got = await call(world.env.app, "GET", `/v2/webhook_endpoints/${endpoint.id}`, {
      token: world.shop.token,
    });
    expect(got.body).toMatchObject({ all_events: true, delivery: { pending: 2 } });
  });

  test("PATCH events sets a list (all of today's types too: new ones then stay out); events: null returns to every type", async () => {
    const endpoint = await create({});
    const narrowed = await patch(endpoint.id, { events: ["message.failed"] });
    expect(narrowed.status).toBe(200);
    expect(narrowed.body).toMatchObject({ events: ["message.failed"], all_events: false });
    expect((await storedRow(endpoint.id)).events).toEqual(["message.failed"]);

    // Every type of today, listed: a list like any other, so a later type is not taken.
    const listedAll = await patch(endpoint.id, { events: [...EVENT_TYPES] });
    expect(listedAll.body).toMatchObject({ events: [...EVENT_TYPES], all_events: false });
    await appendEvents(NEW_TYPE, 1);
    expect(await typesARunReads(endpoint.id)).toEqual([]);

    const back = await patch(endpoint.id, { events: null });
    expect(back.status).toBe(200);
    expect(back.body).toMatchObject({ events: [...EVENT_TYPES], all_events: true });
    expect((await storedRow(endpoint.id)).events).toBeNull();
    // A change of types restarts delivery from the cursor: the new type's event is read now.
    expect(await typesARunReads(endpoint.id)).toEqual([NEW_TYPE]);

    // Other changes leave every type as it is; events: [] is still refused.
    const renamed = await patch(endpoint.id, { description: "all of it" });
    expect(renamed.body.all_events).toBe(true);
    const empty = await patch(endpoint.id, { events: [] });
    expectApiError(empty, 400, "parameter_invalid", "events");
    expect(empty.body.error.message).toContain("or null to receive every type");
    // null is PATCH's; a create omits events instead.
    const nullOnCreate = await call(world.env.app, "POST", "/v2/webhook_endpoints", {
      token: world.shop.token,
      body: { url: "http://127.0.0.1:9/hooks", events: null },
    });
    expectApiError(nullOnCreate, 400, "parameter_invalid", "events");
  });

  test("sql/031: a stored list of every type of then becomes every type; a shorter list stays", async () => {
    // The types there were when sql/031 ran (contact.merged came after, sql/032).
    const typesOf031 = EVENT_TYPES.filter((type) => type.startsWith("message."));
    const full = await create({ events: typesOf031 });
    const reordered = await create({ events: [...typesOf031].reverse() });
    const short = await create({ events: EVENT_TYPES.slice(0, 5) });
    expect((await storedRow(full.id)).events).toEqual(typesOf031);
    const migration = await Bun.file(
      join(import.meta.dir, "../../sql/031_endpoint_every_event_type.sql"),
    ).text();
    // Applied twice: the second run changes nothing.
    for (let run = 0; run < 2; run++) await sql.raw(migration).execute(world.env.deps.db);
    expect((await storedRow(full.id)).events).toBeNull();
    expect((await storedRow(reordered.id)).events).toBeNull();
    expect((await storedRow(short.id)).events).toEqual(EVENT_TYPES.slice(0, 5));
  });
});

describe("a delivery run's read of the log is bounded", () => {
  /** Rows of the event log (every partition) read by `work`, as Postgres counts them in its transaction. */
  async function eventRowsRead<T>(work: (db: typeof world.env.deps.db) => Promise<T>): Promise<[T, number]> {
    return world.env.deps.db.transaction().execute(async (trx) => {
      const result = await work(trx);
      const { rows } = await sql<{ n: number }>`
        SELECT coalesce(sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)), 0)::int AS n
        FROM pg_stat_xact_user_tables WHERE relname LIKE 'events%'`.execute(trx);
      return [result, rows[0]?.n ?? 0];
    });
  }

  test("an endpoint filtering a rare type reads RUN_SCAN_POSITIONS positions a read; its run reaches the rare event and the head", async () => {
    const received: string[] = [];
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (request) => {
        received.push(JSON.parse(await request.text()).type);
        return new Response("ok");
      },
    });
    try {
      const endpoint = await create({
        url: `http://127.0.0.1:${receiver.port}/hooks`,
        events: ["message.read"],
      });
      const start = (await storedRow(endpoint.id)).cursor_seq;
      await appendEvents("message.sent", 3 * RUN_SCAN_POSITIONS);
      const rare = await appendEvents("message.read", 1);

      const row = await storedRow(endpoint.id);
      const [first, rowsRead] = await eventRowsRead((db) =>
        unacknowledgedEvents(db, row, row.cursor_seq, 1000),
      );
      // The positions of its range (and a few lookups, as the plan goes); unbounded, the read walked
      // all 3 x RUN_SCAN_POSITIONS + 1 positions past the cursor.
      expect(rowsRead).toBeGreaterThanOrEqual(RUN_SCAN_POSITIONS);
      expect(rowsRead).toBeLessThan(2 * RUN_SCAN_POSITIONS);
      // None of its type there; it moved on by the positions it examined, short of the end.
      expect(first.rows).toEqual([]);
      expect(first.examinedTo).toBe(start + RUN_SCAN_POSITIONS);
      expect(first.head).toBe(rare);

      const run = await deliverEndpoint(world.env.deps, endpoint.id);
      expect(run).toMatchObject({ ended: "idle", attempts: 1, acknowledged: 1 });
      expect(received).toEqual(["message.read"]);
      expect((await storedRow(endpoint.id)).cursor_seq).toBe(
        await eventHead(world.env.deps.db, world.shop.tenantId),
      );
    } finally {
      await receiver.stop(true);
    }
  });
});
