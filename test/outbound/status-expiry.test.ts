/**
 * Issue 20: a status of a message we never knew by its provider id waited in `status_events` forever.
 * It now expires after 7 days (STATUS_EVENT_EXPIRY, applied by the maintenance worker).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { sql } from "kysely";
import { buildWebhook, type WebhookAccount, webhookTimestamp } from "../../src/channel/webhook-payloads.ts";
import { deleteExpired } from "../../src/db/batched-delete.ts";
import { STATUS_EVENT_EXPIRY } from "../../src/outbound/status.ts";
import { createShop } from "../support/fixtures.ts";
import { createTestEnv, postWebhook, type TestEnv } from "../support/index.ts";

let env: TestEnv;
let account: WebhookAccount;

beforeAll(async () => {
  env = await createTestEnv();
  ({ account } = await createShop(env, "Acme"));
});
afterAll(() => env.close());

/** A delivered status of a provider id we never sent, stored (it waits) by the webhook store. */
async function unknownStatus(id: string): Promise<void> {
  const webhook = buildWebhook(account, {
    statuses: [{ id, status: "delivered", timestamp: webhookTimestamp(), recipient_id: "4915100000666" }],
  });
  const response = await postWebhook(env, webhook);
  expect(response.status).toBe(200);
}

async function waiting(): Promise<string[]> {
  const rows = await env.deps.db.selectFrom("status_events").select("provider_message_id").execute();
  return rows.map((row) => row.provider_message_id).sort();
}

test("waiting statuses older than 7 days go; younger ones stay", async () => {
  await unknownStatus("wamid.expiry-old");
  await unknownStatus("wamid.expiry-young");
  const now = env.clock.now();
  const age = (ms: number) => new Date(now.getTime() - ms);
  await sql`UPDATE status_events SET received_at = ${age(STATUS_EVENT_EXPIRY.keptMs + 60_000)} WHERE provider_message_id = 'wamid.expiry-old'`.execute(
    env.deps.db,
  );
  await sql`UPDATE status_events SET received_at = ${age(STATUS_EVENT_EXPIRY.keptMs - 60_000)} WHERE provider_message_id = 'wamid.expiry-young'`.execute(
    env.deps.db,
  );
  expect(await waiting()).toEqual(["wamid.expiry-old", "wamid.expiry-young"]);

  expect(await deleteExpired(env.deps.db, now, STATUS_EVENT_EXPIRY)).toBe(1);
  expect(await waiting()).toEqual(["wamid.expiry-young"]);
  expect(await deleteExpired(env.deps.db, now, STATUS_EVENT_EXPIRY)).toBe(0);
});
