import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ChannelProvider } from "../../src/channel/provider.ts";
import { createDb, type Db } from "../../src/db/connect.ts";
import { sweep } from "../../src/maintenance/sweeper.ts";
import { adoptProviderId, providerIdStash } from "../../src/outbound/send.ts";
import { applyStatusEvents } from "../../src/outbound/status.ts";
import {
  createShop,
  messageRow,
  postMessage,
  type Shop,
  sentTo,
  statusEventsOf,
} from "../support/fixtures.ts";
import {
  createTestEnv,
  deliverOne,
  eventually,
  spawnWorker,
  type TestEnv,
  type WorkerProcess,
} from "../support/index.ts";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.ts";

/**
 * The provider-id stash (issue 12): the provider accepted a send, Postgres could not record its
 * id. The worker keeps retrying the record while it lives; killed meanwhile, the retry adopts the
 * id from the stash and sends nothing again. Status webhooks are held back (a long status delay)
 * so that no echo of our message id can stand in for the stash.
 */
let env: TestEnv;
let tenant: Shop;
let pgProxy: TcpProxy;
let proxiedUrl: string;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, statusDelayMs: 600_000 });
  tenant = await createShop(env, "Stash Shop", { templates: true });
  pgProxy = await startTcpProxy({ host: "127.0.0.1", port: 5432 });
  const url = new URL(env.config.databaseUrl);
  url.port = String(pgProxy.port);
  proxiedUrl = url.toString();
});
afterAll(async () => {
  await pgProxy.close();
  await env.close();
});

async function accept(index: number): Promise<string> {
  const result = await postMessage(env.app, tenant.token, {
    to: `+49151000077${String(index).padStart(2, "0")}`,
    template: { name: "order_shipped", language: "en", variables: { body: ["Ada", `#${index}`] } },
  });
  expect(result.status).toBe(201);
  return result.body.id;
}

const stash = () => providerIdStash(env.deps);

describe("provider accepted, Postgres cannot record the id", () => {
  test("the worker keeps retrying the record while it lives, and records it once Postgres is back", async () => {
    const messageId = await accept(1);
    const db: Db = createDb(proxiedUrl, { connectionTimeoutMillis: 500 });
    // The outage starts the moment the provider has answered.
    const provider: ChannelProvider = {
      ...env.deps.provider,
      async sendMessage(credentials, payload) {
        const answer = await env.deps.provider.sendMessage(credentials, payload);
        pgProxy.cut();
        setTimeout(() => pgProxy.restore(), 1500);
        return answer;
      },
    };
    try {
      const outcome = await deliverOne({ ...env.deps, db, provider }, messageId);
      expect(outcome).toBe("sent");
    } finally {
      pgProxy.restore();
      await db.destroy();
    }
    const sends = await sentTo(env, tenant.phoneNumberId, messageId);
    expect(sends).toHaveLength(1);
    expect(await messageRow(env.deps.db, messageId)).toMatchObject({
      status: "sent",
      provider_message_id: sends[0]!.id,
      send_started_at: null,
    });
    expect(await stash().get(messageId)).toBeUndefined();
  }, 30_000);

  test("worker killed before the record: the retry adopts the stashed id and sends nothing", async () => {
    let worker: WorkerProcess | undefined;
    let replacement: WorkerProcess | undefined;
    try {
      // The in-doubt rule would wait ten minutes before sending again: only the stash can settle it.
      const workerEnv = { DATABASE_URL: proxiedUrl, SEND_IN_DOUBT_MS: "600000" };
      worker = spawnWorker(env, "send", workerEnv);
      // The provider holds its answer long enough for Postgres to go away meanwhile.
      await fetch(`${env.simulatorUrl}/_sim/slow-next`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ count: 1, delay_ms: 1500 }),
      });
      const messageId = await accept(2);
      await eventually(
        async () => (await messageRow(env.deps.db, messageId)).send_started_at !== null,
        20_000,
      );
      pgProxy.cut();
      const stashed = await eventually(() => stash().get(messageId), 10_000);
      worker.proc.kill("SIGKILL");
      await worker.proc.exited;
      pgProxy.restore();

      expect(await messageRow(env.deps.db, messageId)).toMatchObject({
        status: "accepted",
        provider_message_id: null,
      });
      replacement = spawnWorker(env, "send", workerEnv);
      await eventually(
        async () => (await messageRow(env.deps.db, messageId)).provider_message_id !== null,
        30_000,
      );

      const sends = await sentTo(env, tenant.phoneNumberId, messageId);
      expect(sends).toHaveLength(1);
      expect(sends[0]!.id).toBe(stashed);
      expect(await messageRow(env.deps.db, messageId)).toMatchObject({
        status: "sent",
        provider_message_id: stashed,
      });
      await eventually(async () => (await stash().get(messageId)) === undefined);
    } finally {
      pgProxy.restore();
      worker?.proc.kill("SIGKILL");
      await replacement?.stop();
    }
  }, 90_000);

  test("the sweeper adopts a stashed id before it nudges the unsent", async () => {
    const messageId = await accept(3);
    // As a worker leaves it when it dies between the stash and the record.
    await env.deps.db
      .updateTable("messages")
      .set({ send_started_at: new Date(Date.now() - 60_000) })
      .where("id", "=", messageId)
      .execute();
    await env.deps.redis.hset(env.deps.keys.providerIdStash(), messageId, "wamid.STASHED3");

    const swept = await sweep(env.deps, 0);
    expect(swept.adopted).toBe(1);
    expect(await messageRow(env.deps.db, messageId)).toMatchObject({
      status: "sent",
      provider_message_id: "wamid.STASHED3",
      send_started_at: null,
    });
    expect(await stash().get(messageId)).toBeUndefined();
    expect(await sentTo(env, tenant.phoneNumberId, messageId)).toHaveLength(0);
  });

  test("a status for a message whose send is in doubt is kept, and applied once the id is known", async () => {
    const messageId = await accept(4);
    await env.deps.db
      .updateTable("messages")
      .set({ send_started_at: new Date() })
      .where("id", "=", messageId)
      .execute();
    // The provider's webhook for its id (without our id echoed) reaches the api first.
    const posted = await fetch(`${env.simulatorUrl}/_sim/status`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        wamid: "wamid.DOUBT4",
        status: "delivered",
        phone_number_id: tenant.phoneNumberId,
        recipient_id: "4915100007704",
      }),
    });
    expect(((await posted.json()) as { webhook_status: number }).webhook_status).toBe(200);
    // The status worker finds no message by that id: the event waits, unapplied.
    expect(await applyStatusEvents(env.deps.db, env.deps.clock, "wamid.DOUBT4")).toBe(0);
    expect(await messageRow(env.deps.db, messageId)).toMatchObject({
      status: "accepted",
      provider_message_id: null,
    });

    expect(await adoptProviderId(env.deps, messageId, "wamid.DOUBT4")).toBe(true);
    expect(await messageRow(env.deps.db, messageId)).toMatchObject({
      status: "delivered",
      provider_message_id: "wamid.DOUBT4",
    });
    // Applied, so no longer kept.
    expect(await statusEventsOf(env.deps.db, "wamid.DOUBT4")).toHaveLength(0);
  });
});
