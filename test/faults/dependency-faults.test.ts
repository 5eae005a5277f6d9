import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import pg from "pg";
import { DatabaseError } from "pg-protocol";
import { type App, createApp } from "../../src/app.ts";
import { buildWebhook, webhookTimestamp } from "../../src/channel/webhook-payloads.ts";
import { createDb, type Db } from "../../src/db/connect.ts";
import { isDependencyDown } from "../../src/http/dependency-faults.ts";
import { createRedis, type RedisClient } from "../../src/redis/connect.ts";
import {
  createShop,
  messageRow,
  postMessage,
  type Shop,
  sentTo,
  statusEventsOf,
} from "../support/fixtures.ts";
import {
  type CallResult,
  call,
  createTestEnv,
  eventually,
  expectUnavailable,
  postWebhook,
  spawnWorker,
  type TestEnv,
} from "../support/index.ts";
import { startTcpProxy } from "../support/tcp-proxy.ts";

/**
 * One mapping for dependency faults (issue 12): Postgres terminating a connection mid-request
 * (57P01) and Redis closed both answer 503 `service_unavailable` with Retry-After, on /v2 and on
 * the provider's webhook alike; the process survives and the next request gets a fresh connection.
 */
let env: TestEnv;
let tenant: Shop;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  tenant = await createShop(env, "Faults Shop", { templates: true });
});
afterAll(() => env.close());

function pgError(code: string, message: string): DatabaseError {
  const error = new DatabaseError(message, message.length, "error");
  error.code = code;
  return error;
}

describe("isDependencyDown", () => {
  test("Postgres connection faults are dependency faults; query errors are not", () => {
    for (const code of ["57P01", "57P02", "57P03", "08006", "08001", "08P01"]) {
      expect(isDependencyDown(pgError(code, "gone"))).toBe(true);
    }
    expect(isDependencyDown(new Error("Connection terminated unexpectedly"))).toBe(true);
    expect(isDependencyDown(new Error("timeout exceeded when trying to connect"))).toBe(true);
    expect(
      isDependencyDown(new Error("Client has encountered a connection error and is not queryable")),
    ).toBe(true);
    expect(isDependencyDown(Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }))).toBe(
      true,
    );
    // A wrapper that keeps the fault as its cause.
    expect(isDependencyDown(new Error("insert failed", { cause: pgError("57P01", "terminating") }))).toBe(
      true,
    );
    expect(isDependencyDown(pgError("23505", "duplicate key value violates unique constraint"))).toBe(false);
    expect(isDependencyDown(pgError("42P01", 'relation "nope" does not exist'))).toBe(false);
    expect(isDependencyDown(new Error("something else"))).toBe(false);
    expect(isDependencyDown("Connection terminated")).toBe(false);
  });

  test("ioredis giving up (MaxRetriesPerRequestError), a closed connection, a command timeout", async () => {
    const dead = createRedis("redis://127.0.0.1:1");
    try {
      const gaveUp = await dead.get("x").then(
        () => undefined,
        (error: Error) => error,
      );
      expect(gaveUp?.name).toBe("MaxRetriesPerRequestError");
      expect(isDependencyDown(gaveUp)).toBe(true);
    } finally {
      dead.disconnect();
    }
    const closed = createRedis(env.config.redisUrl);
    closed.disconnect();
    const error = await closed.get("x").then(
      () => undefined,
      (e: Error) => e,
    );
    expect(error?.message).toBe("Connection is closed.");
    expect(isDependencyDown(error)).toBe(true);
    expect(isDependencyDown(new Error("Command timed out"))).toBe(true);
    expect(isDependencyDown(new Error("LOADING Redis is loading the dataset in memory"))).toBe(true);
  });

  test("a Redis Cluster without a node to talk to: a bounded wait, then a dependency fault", async () => {
    const unreachable = createRedis({ redisUrl: "", redisClusterNodes: [{ host: "127.0.0.1", port: 1 }] });
    try {
      const started = performance.now();
      const waited = await unreachable.get("x").then(
        () => undefined,
        (e: Error) => e,
      );
      expect(performance.now() - started).toBeLessThan(5000);
      expect(isDependencyDown(waited)).toBe(true);
    } finally {
      unreachable.disconnect();
    }
    // What a Cluster client says once it gave up on every node it knows.
    expect(isDependencyDown(new Error("None of startup nodes is available"))).toBe(true);
  });
});

describe("Postgres terminates the connection of a request in flight (57P01)", () => {
  let db: Db;
  let app: App;
  let admin: pg.Client;

  beforeAll(async () => {
    // One connection, named, so the test can find and terminate it.
    db = createDb(env.config.databaseUrl, { max: 1, applicationName: "faults-victim" });
    app = createApp({ ...env.deps, db });
    admin = new pg.Client({ connectionString: env.config.databaseUrl });
    await admin.connect();
  });
  afterAll(async () => {
    await admin.end();
    await db.destroy();
  });

  /** Holds `table` locked, runs `request`, and terminates the request's backend once it waits. */
  async function terminatedWhileWaiting(table: string, request: () => Promise<CallResult>) {
    // The pool's one connection is open before the lock (a new one may wait behind it to start).
    await sql`SELECT 1`.execute(db);
    await admin.query("BEGIN");
    await admin.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    const answer = request();
    try {
      const pid = await eventually(async () => {
        const found = await admin.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE application_name = 'faults-victim' AND wait_event_type = 'Lock'",
        );
        return found.rows[0]?.pid;
      });
      await admin.query("SELECT pg_terminate_backend($1)", [pid]);
    } finally {
      await admin.query("ROLLBACK");
    }
    return answer;
  }

  function statusWebhook(wamid: string) {
    const delivered = { id: wamid, status: "delivered" as const, recipient_id: "4915100000009" };
    const body = buildWebhook(tenant.account, {
      statuses: [{ ...delivered, timestamp: webhookTimestamp() }],
    });
    return postWebhook(env, body, app);
  }

  test("/webhooks/whatsapp: 503 with Retry-After (the provider retries it), then 200 on a fresh connection", async () => {
    expectUnavailable(await terminatedWhileWaiting("status_events", () => statusWebhook("wamid.FAULT1")));
    const retried = await statusWebhook("wamid.FAULT1");
    expect(retried.status).toBe(200);
    expect(await statusEventsOf(env.deps.db, "wamid.FAULT1")).toHaveLength(1);
  });

  test("GET /v2/conversations: 503 with Retry-After, then 200", async () => {
    const read = () => call(app, "GET", "/v2/conversations", { token: tenant.token });
    expectUnavailable(await terminatedWhileWaiting("conversations", read));
    expect((await read()).status).toBe(200);
    expect((await sql<{ one: number }>`SELECT 1 AS one`.execute(db)).rows[0]?.one).toBe(1);
  });
});

describe("Redis closed", () => {
  let dead: RedisClient;
  beforeAll(() => {
    dead = createRedis("redis://127.0.0.1:1");
  });
  afterAll(() => dead.disconnect());

  test("POST /v2/messages: Redis gone right after the admission (which claimed the Idempotency-Key) still accepts, never a 500", async () => {
    // Admission (the limits and the key's claim, one script; the admissions of a turn go out in
    // one pipeline, src/redis/coalesce.ts) still answers; every later command meets a Redis that is
    // gone (ioredis gives up with MaxRetriesPerRequestError, as in the outage of issue 12): the done
    // marker's SET, a plain command when it is alone, else in a pipeline, is sent to the dead one.
    // The key's done marker is lost with it: its Postgres record is the backstop.
    let deadWrites = 0;
    const pipelineOf = (live: ReturnType<RedisClient["pipeline"]>) => {
      let gone: ReturnType<RedisClient["pipeline"]> | undefined;
      return new Proxy(live, {
        get(target, property, receiver) {
          if (property === "set") {
            gone ??= dead.pipeline();
            deadWrites++;
            return gone.set.bind(gone);
          }
          if (property === "exec" && gone) return gone.exec.bind(gone);
          const value = Reflect.get(target, property, receiver);
          return typeof value === "function" ? value.bind(target) : value;
        },
      });
    };
    const redis = new Proxy(env.deps.redis, {
      get(target, property, receiver) {
        if (property === "pipeline") return () => pipelineOf(target.pipeline());
        if (property === "set") deadWrites++;
        if (property === "set" || property === "get" || property === "del") return dead[property].bind(dead);
        return Reflect.get(target, property, receiver);
      },
    });
    const app = createApp({ ...env.deps, redis });
    const result = await postMessage(
      app,
      tenant.token,
      {
        to: "+4915100000002",
        template: { name: "order_shipped", language: "en", variables: { body: ["A", "1"] } },
      },
      { key: "faults-redis-1" },
    );
    expect(result.status).toBe(201);
    expect(deadWrites).toBeGreaterThan(0);
    const record = await env.deps.db
      .selectFrom("idempotency_keys")
      .select("message_id")
      .where("key", "=", "faults-redis-1")
      .executeTakeFirst();
    expect(record?.message_id).toBe((result.body as { id: string }).id);
  });

  test("a closed connection on a read route: 503 with Retry-After", async () => {
    const closed = createRedis(env.config);
    closed.disconnect();
    const app = createApp({ ...env.deps, redis: closed });
    expectUnavailable(await call(app, "GET", "/v2/conversations", { token: tenant.token }));
  });
});

describe("a worker while Postgres is away", () => {
  test("stays up, takes the job again once Postgres is back, and sends it once", async () => {
    const proxy = await startTcpProxy({ host: "127.0.0.1", port: 5432 });
    const url = new URL(env.config.databaseUrl);
    url.port = String(proxy.port);
    const worker = spawnWorker(env, "send", { DATABASE_URL: url.toString() });
    try {
      await Bun.sleep(1000); // connected and consuming
      proxy.cut();
      const accepted = await postMessage(env.app, tenant.token, {
        to: "+4915100000003",
        template: { name: "order_shipped", language: "en", variables: { body: ["A", "3"] } },
      });
      expect(accepted.status).toBe(201);
      await Bun.sleep(3000); // the job meets the outage: deferred, consumers paused
      expect(worker.proc.exitCode).toBeNull();
      proxy.restore();

      const messageId: string = accepted.body.id;
      await eventually(
        async () => (await messageRow(env.deps.db, messageId)).provider_message_id !== null,
        20_000,
      );
      expect(await sentTo(env, tenant.phoneNumberId, messageId)).toHaveLength(1);
      expect(worker.proc.exitCode).toBeNull();
    } finally {
      await worker.stop();
      await proxy.close();
    }
  }, 60_000);
});
