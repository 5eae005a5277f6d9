/**
 * DATABASE_READ_URL against a real streaming replica: a private primary (initdb) and a hot standby
 * made from it with `pg_basebackup -R`, each on a free port in a temporary folder, as the
 * unprivileged user Debian's binaries need (scripts/private-postgres.ts). Skipped, with the reason,
 * where those binaries cannot run.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "kysely";
import {
  findPgTools,
  freePort,
  type PrivatePostgres,
  privatePostgres,
} from "../../scripts/private-postgres.ts";
import { createApplication } from "../../src/applications/service.ts";
import { createDb, type Db } from "../../src/db/connect.ts";
import { REPLICA_RETRY_MS } from "../../src/db/read-replica.ts";
import { createShop, postMessage, receive, type Shop } from "../support/fixtures.ts";
import { call, createTestEnv, eventually, getToken, type TestEnv } from "../support/index.ts";
import { epoch } from "../support/reading.ts";

const tools = findPgTools();
const skipReason =
  "problem" in tools
    ? tools.problem
    : existsSync(join(tools.bin, "pg_basebackup"))
      ? undefined
      : `pg_basebackup not found in ${tools.bin}`;
if (skipReason) console.warn(`read-replica.test.ts skipped: ${skipReason}`);

describe.skipIf(skipReason !== undefined)("reads from a streaming replica", () => {
  let folder: string;
  let primary: PrivatePostgres;
  let standby: PrivatePostgres;
  /** Sessions to the clusters' `postgres` databases, to watch and steer replication. */
  let primaryAdmin: Db;
  let standbyAdmin: Db;
  let env: TestEnv;
  let shop: Shop;
  /** Another application of the same tenant, which writes nothing. */
  let bystanderToken: string;
  let contactId: string;

  const lsn = async (db: Db, expression: "pg_current_wal_insert_lsn()" | "pg_last_wal_replay_lsn()") =>
    Number(
      (await sql<{ lsn: string }>`SELECT ${sql.raw(expression)} - '0/0' AS lsn`.execute(db)).rows[0]?.lsn,
    );

  /** Until the standby has replayed everything the primary has written so far. */
  async function caughtUp(): Promise<void> {
    const target = await lsn(primaryAdmin, "pg_current_wal_insert_lsn()");
    await eventually(async () => (await lsn(standbyAdmin, "pg_last_wal_replay_lsn()")) >= target, 30_000);
  }

  /** db_reads_total for one (database, route). */
  async function reads(database: "replica" | "primary", route: string): Promise<number> {
    const metric = await env.deps.metrics.reads.get();
    return metric.values.find((v) => v.labels.database === database && v.labels.route === route)?.value ?? 0;
  }

  const history = (token: string) => call(env.app, "GET", `/v2/contacts/${contactId}/messages`, { token });
  const historyIds = async (token: string) => {
    const page = await history(token);
    expect(page.status).toBe(200);
    return (page.body.data as { id: string }[]).map((m) => m.id);
  };

  beforeAll(async () => {
    if ("problem" in tools) return;
    folder = mkdtempSync(join(tmpdir(), "read-replica-"));
    const commandLog = join(folder, "commands.log");
    primary = privatePostgres({
      tools,
      home: join(folder, "primary"),
      port: freePort(),
      commandLog,
      settings: ["wal_level=replica", "max_wal_senders=4", "fsync=off"],
    });
    standby = privatePostgres({
      tools,
      home: join(folder, "standby"),
      port: freePort(),
      commandLog,
      settings: ["hot_standby=on", "fsync=off"],
    });
    await primary.init();
    await primary.start();
    await standby.standbyOf(primary);
    await standby.start();
    primaryAdmin = createDb(primary.url("postgres"), { max: 1 });
    standbyAdmin = createDb(standby.url("postgres"), { max: 1 });

    env = await createTestEnv({
      simulator: true,
      env: { DATABASE_URL: primary.url("replica_test"), DATABASE_READ_URL: standby.url("replica_test") },
    });
    shop = await createShop(env, "Replica shop");
    const bystander = await createApplication(env.deps.db, {
      tenantId: shop.tenantId,
      name: "Reporting",
      readLimit: 1000,
      sendLimit: 1000,
    });
    bystanderToken = await getToken(env.app, bystander.application.clientId, bystander.clientSecret);
    // The customer writes first: free text may be sent for 24 hours.
    contactId = (
      await receive(env, shop, {
        from: "4915100002000",
        type: "text",
        text: "hi",
        timestamp: epoch(env.clock.now()),
      })
    ).contactId;
    await caughtUp();
  }, 120_000);

  afterAll(async () => {
    await env?.close();
    await Promise.allSettled([primaryAdmin?.destroy(), standbyAdmin?.destroy()]);
    for (const cluster of [standby, primary]) if (cluster?.running) await cluster.stop("immediate");
    if (folder) rmSync(folder, { recursive: true, force: true });
  });

  test("reads go to the replica", async () => {
    const before = await reads("replica", "replica");
    for (const path of [`/v2/contacts/${contactId}`, "/v2/conversations", "/v2/messages"]) {
      expect((await call(env.app, "GET", path, { token: bystanderToken })).status).toBe(200);
    }
    expect(await historyIds(bystanderToken)).toHaveLength(1);
    expect(await reads("replica", "replica")).toBe(before + 4);
    // The standby itself saw them: the api's read pool is connected to it.
    const sessions = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE application_name = 'messaging-api-read' AND datname = 'replica_test'`.execute(standbyAdmin);
    expect(sessions.rows[0]!.n).toBeGreaterThan(0);
  });

  test("an application reads its own send at once, even from a replica that has stopped replaying", async () => {
    await sql`SELECT pg_wal_replay_pause()`.execute(standbyAdmin);
    try {
      const sent = await postMessage(env.app, shop.token, {
        contact: contactId,
        body: "Your parcel is on its way",
      });
      expect(sent.status).toBe(201);
      const behind = await reads("primary", "replica_behind");

      // The sender: from the primary, since the replica has not replayed its send.
      expect(await historyIds(shop.token)).toContain(sent.body.id);
      const conversations = await call(env.app, "GET", "/v2/conversations", { token: shop.token });
      expect(conversations.body.data[0].last_message.id).toBe(sent.body.id);
      expect(await reads("primary", "replica_behind")).toBe(behind + 2);

      // Another application, which wrote nothing, reads the replica as it stands: without the send.
      expect(await historyIds(bystanderToken)).not.toContain(sent.body.id);

      await sql`SELECT pg_wal_replay_resume()`.execute(standbyAdmin);
      await eventually(async () => (await historyIds(bystanderToken)).includes(sent.body.id), 30_000);
      // Caught up: the sender's reads go back to the replica.
      const onReplica = await reads("replica", "replica");
      expect(await historyIds(shop.token)).toContain(sent.body.id);
      expect(await reads("replica", "replica")).toBe(onReplica + 1);
    } finally {
      await sql`SELECT pg_wal_replay_resume()`.execute(standbyAdmin);
    }
  });

  test("a stopped replica: reads fall back to the primary, and return to the replica when it is back", async () => {
    await standby.stop("immediate");
    const down = await reads("primary", "replica_down");
    for (const token of [bystanderToken, shop.token]) expect(await historyIds(token)).toHaveLength(2);
    for (const path of [`/v2/contacts/${contactId}`, "/v2/conversations", "/v2/messages"]) {
      expect((await call(env.app, "GET", path, { token: bystanderToken })).status).toBe(200);
    }
    expect(await reads("primary", "replica_down")).toBe(down + 5);

    await standby.start();
    await Bun.sleep(REPLICA_RETRY_MS);
    const onReplica = await reads("replica", "replica");
    await eventually(async () => {
      expect(await historyIds(bystanderToken)).toHaveLength(2);
      return (await reads("replica", "replica")) > onReplica;
    }, 30_000);
  });
});
