/**
 * Issue 42 item 3: rotating an endpoint's secret is bounded. At most two secrets sign a delivery (the
 * current one and one previous); rotating again ends the older previous one at once; the previous
 * one signs for `expire_previous_in` seconds (0–86400, default 24 h). Deliveries are made by the
 * delivery run itself (in this process) to a real receiver, and verified as an integrator would,
 * with the reference `standardwebhooks` package.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { sql } from "kysely";
import { Webhook } from "standardwebhooks";
import { buildWebhook, type WebhookAccount, webhookTimestamp } from "../../src/channel/webhook-payloads.ts";
import { seal } from "../../src/crypto/secret-box.ts";
import { sequenceFeed } from "../../src/feed/sequencer.ts";
import { finalizePendingInbound } from "../../src/inbound/finalize.ts";
import { deliverEndpoint } from "../../src/push/delivery.ts";
import { findEndpoint } from "../../src/push/repository.ts";
import { signingSecrets } from "../../src/push/service.ts";
import { newEndpointSecret } from "../../src/push/signature.ts";
import { createShop } from "../support/fixtures.ts";
import { call, createTestEnv, expectApiError, postWebhook, type TestEnv } from "../support/index.ts";

interface Received {
  body: string;
  headers: Record<"webhook-id" | "webhook-timestamp" | "webhook-signature", string>;
}

let env: TestEnv;
let token: string;
let tenantId: string;
let account: WebhookAccount;
const received: Received[] = [];
let receiver: ReturnType<typeof Bun.serve>;
let sequence = 0;

beforeAll(async () => {
  env = await createTestEnv();
  ({ token, account, tenantId } = await createShop(env, "Rotator"));
  receiver = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      received.push({
        body: await request.text(),
        headers: {
          "webhook-id": request.headers.get("webhook-id") ?? "",
          "webhook-timestamp": request.headers.get("webhook-timestamp") ?? "",
          "webhook-signature": request.headers.get("webhook-signature") ?? "",
        },
      });
      return new Response(null, { status: 204 });
    },
  });
});
afterAll(async () => {
  await receiver?.stop(true);
  await env.close();
});

async function createEndpoint(): Promise<{ id: string; secret: string }> {
  const response = await call(env.app, "POST", "/v2/webhook_endpoints", {
    token,
    body: { url: `http://127.0.0.1:${receiver.port}/hooks`, events: ["message.received"] },
  });
  expect(response.status).toBe(201);
  return { id: response.body.id, secret: response.body.secret };
}

function rotate(endpointId: string, body?: unknown) {
  return call(env.app, "POST", `/v2/webhook_endpoints/${endpointId}/rotate_secret`, { token, body });
}

/** A customer writes once; the event is numbered, and the endpoint's delivery run posts it. */
async function deliverNextEvent(endpointId: string): Promise<Received> {
  sequence++;
  const response = await postWebhook(
    env,
    buildWebhook(account, {
      contacts: [{ profile: { name: "C" }, wa_id: "4915100000901" }],
      messages: [
        {
          from: "4915100000901",
          id: `wamid.rotation-${sequence}`,
          timestamp: webhookTimestamp(),
          type: "text",
          text: { body: `#${sequence}` },
        },
      ],
    }),
  );
  expect(response.status).toBe(200);
  await finalizePendingInbound(env.deps.db, env.clock);
  await sequenceFeed(env.deps.db);
  const before = received.length;
  const run = await deliverEndpoint(env.deps, endpointId);
  expect(run.acknowledged).toBe(1);
  expect(received.length).toBe(before + 1);
  return received[received.length - 1] as Received;
}

const signatures = (delivery: Received) => delivery.headers["webhook-signature"].split(" ");
const verifies = (secret: string, delivery: Received) => {
  try {
    new Webhook(secret).verify(delivery.body, delivery.headers);
    return true;
  } catch {
    return false;
  }
};

describe("rotate_secret: at most two secrets sign", () => {
  test("rotated many times, a delivery carries two signatures: the new secret's and the one it replaced", async () => {
    const endpoint = await createEndpoint();
    const secrets = [endpoint.secret];
    for (let i = 0; i < 40; i++) {
      const rotated = await rotate(endpoint.id);
      expect(rotated.status).toBe(200);
      secrets.push(rotated.body.secret);
    }
    const delivery = await deliverNextEvent(endpoint.id);
    expect(signatures(delivery)).toHaveLength(2);
    expect(verifies(secrets[40] as string, delivery)).toBe(true);
    expect(verifies(secrets[39] as string, delivery)).toBe(true);
    // Every older one stopped when the secret after it was replaced.
    for (const old of secrets.slice(0, 39)) expect(verifies(old, delivery)).toBe(false);
    // The bound is the row's: it holds one previous secret.
    const row = await findEndpoint(env.deps.db, tenantId, endpoint.id);
    expect(row?.previous_secret).toEqual(expect.any(String));
    expect(Object.keys(row ?? {}).filter((key) => key.includes("secret"))).toEqual([
      "secret",
      "previous_secret",
      "previous_secret_expires_at",
    ]);
  });

  test("expire_previous_in 0: the replaced secret stops now, one signature", async () => {
    const endpoint = await createEndpoint();
    const rotated = await rotate(endpoint.id, { expire_previous_in: 0 });
    expect(rotated.status).toBe(200);
    const delivery = await deliverNextEvent(endpoint.id);
    expect(signatures(delivery)).toHaveLength(1);
    expect(verifies(rotated.body.secret, delivery)).toBe(true);
    expect(verifies(endpoint.secret, delivery)).toBe(false);
  });

  test("the previous secret verifies within its window, and not after it", async () => {
    const endpoint = await createEndpoint();
    const rotated = await rotate(endpoint.id, { expire_previous_in: 60 });
    env.clock.advance(59);
    const within = await deliverNextEvent(endpoint.id);
    expect(signatures(within)).toHaveLength(2);
    expect(verifies(endpoint.secret, within)).toBe(true);
    expect(verifies(rotated.body.secret, within)).toBe(true);
    env.clock.advance(2);
    const after = await deliverNextEvent(endpoint.id);
    expect(signatures(after)).toHaveLength(1);
    expect(verifies(endpoint.secret, after)).toBe(false);
    expect(verifies(rotated.body.secret, after)).toBe(true);
  });

  test("without a body, or with {}, the previous secret signs for 24 hours", async () => {
    for (const body of [undefined, {}]) {
      const endpoint = await createEndpoint();
      const rotated = await rotate(endpoint.id, body);
      expect(rotated.status).toBe(200);
      const row = await findEndpoint(env.deps.db, tenantId, endpoint.id);
      if (!row) throw new Error("no endpoint");
      const now = env.clock.now().getTime();
      expect(row.previous_secret_expires_at?.getTime()).toBe(now + 86_400_000);
      const key = env.config.providerTokenKey;
      expect(signingSecrets(key, row, new Date(now + 86_399_000))).toEqual([
        rotated.body.secret,
        endpoint.secret,
      ]);
      expect(signingSecrets(key, row, new Date(now + 86_400_000))).toEqual([rotated.body.secret]);
    }
  });

  test("expire_previous_in must be an integer from 0 to 86400: 400 parameter_invalid naming it", async () => {
    const endpoint = await createEndpoint();
    for (const value of [-1, 86_401, 1.5, "60", null, true]) {
      const refused = await rotate(endpoint.id, { expire_previous_in: value });
      expectApiError(refused, 400, "parameter_invalid", "expire_previous_in");
      expect(refused.body.error.message).toContain("0 to 86400");
    }
    expectApiError(await rotate(endpoint.id, { expire: 5 }), 400, "parameter_unknown", "expire");
    // Nothing was rotated by a refused call.
    const delivery = await deliverNextEvent(endpoint.id);
    expect(signatures(delivery)).toHaveLength(1);
    expect(verifies(endpoint.secret, delivery)).toBe(true);
  });

  test("two rotations at once: each new secret is the other's previous, and both still sign", async () => {
    const endpoint = await createEndpoint();
    const [first, second] = await Promise.all([rotate(endpoint.id), rotate(endpoint.id)]);
    const delivery = await deliverNextEvent(endpoint.id);
    expect(signatures(delivery)).toHaveLength(2);
    expect(verifies(first?.body.secret, delivery)).toBe(true);
    expect(verifies(second?.body.secret, delivery)).toBe(true);
  });
});

describe("sql/030: endpoints rotated before keep one previous secret", () => {
  test("the newest previous secret still in its overlap is kept; older and expired ones are dropped", async () => {
    const endpoint = await createEndpoint();
    const key = env.config.providerTokenKey;
    const sealed = (secret: string) => seal(key, secret, `${endpoint.id}:previous`);
    const [newest, older, expired] = [newEndpointSecret(), newEndpointSecret(), newEndpointSecret()];
    const hoursFromNow = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString();
    const migration = await Bun.file(
      join(import.meta.dir, "../../sql/030_one_previous_endpoint_secret.sql"),
    ).text();
    // The table as it was before sql/030, in a transaction that is rolled back: the migration's own text.
    await env.deps.db
      .transaction()
      .execute(async (trx) => {
        await sql`ALTER TABLE webhook_endpoints
          DROP CONSTRAINT webhook_endpoints_previous_secret_pair,
          DROP COLUMN previous_secret, DROP COLUMN previous_secret_expires_at,
          ADD COLUMN previous_secrets jsonb NOT NULL DEFAULT '[]'`.execute(trx);
        const previous = [
          { secret: sealed(older), expires_at: hoursFromNow(2) },
          { secret: sealed(newest), expires_at: hoursFromNow(20) },
          { secret: sealed(expired), expires_at: hoursFromNow(-1) },
        ];
        await sql`UPDATE webhook_endpoints SET previous_secrets = ${JSON.stringify(previous)}::jsonb
          WHERE id = ${endpoint.id}`.execute(trx);
        await sql.raw(migration).execute(trx);
        const row = await trx
          .selectFrom("webhook_endpoints")
          .selectAll()
          .where("id", "=", endpoint.id)
          .executeTakeFirstOrThrow();
        expect(signingSecrets(key, row, new Date())).toEqual([endpoint.secret, newest]);
        expect(row.previous_secret_expires_at?.toISOString()).toBe(previous[1]?.expires_at);
        throw new Error("rolled back");
      })
      .catch((error: Error) => {
        if (error.message !== "rolled back") throw error;
      });
  });
});
