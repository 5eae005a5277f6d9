import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signPayload } from "../../src/channel/signature.ts";
import { buildWebhook } from "../../src/channel/webhook-payloads.ts";
import { HISTORY_COLUMNS } from "../../src/history/repository.ts";
import { finalizeInbound } from "../../src/inbound/finalize.ts";
import { sweep } from "../../src/maintenance/sweeper.ts";
import { applyStatusEvents } from "../../src/outbound/status.ts";
import { jobIdFor } from "../../src/queues/index.ts";
import {
  createShop,
  customerWrites,
  type InboundFields,
  messageRow,
  type Shop,
  statusEventsOf,
  storeMessage,
} from "../support/fixtures.ts";
import {
  createTestEnv,
  deleteRedisPrefix,
  eventually,
  spawnWorker,
  type TestEnv,
  workJob,
} from "../support/index.ts";

let env: TestEnv;
let shop: Shop;
let tenantId: string;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { anonymous: 1000, token: 1000 } });
  shop = await createShop(env, "Acme");
  tenantId = shop.tenantId;
});
afterAll(() => env.close());

async function simulate(path: string, body: unknown) {
  const response = await fetch(`${env.simulatorUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as { id?: string; webhook_status: number };
}

/** The customer writes, through the simulator, which posts a signed webhook to the api. */
function inbound(fields: Omit<InboundFields, "from"> & { from?: string }) {
  return customerWrites(env, shop.phoneNumberId, { from: "4915123456789", ...fields });
}

async function storedEvents(): Promise<number> {
  const row = await env.deps.db
    .selectFrom("inbound_events")
    .select((eb) => eb.fn.countAll<number>().as("n"))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

function webhookBody(messageId: string) {
  return buildWebhook(shop.account, {
    contacts: [{ profile: { name: "Replay" }, wa_id: "4915100000001" }],
    messages: [
      { from: "4915100000001", id: messageId, timestamp: "1790000000", type: "text", text: { body: "hi" } },
    ],
  });
}

async function postWebhook(raw: string, signature: string | undefined) {
  return fetch(`${env.apiUrl}/webhooks/whatsapp`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(signature && { "x-hub-signature-256": signature }) },
    body: raw,
  });
}

describe("webhook ingestion", () => {
  test("GET verification answers the challenge only with the verify token", async () => {
    const ok = await fetch(
      `${env.apiUrl}/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=dev-verify-token&hub.challenge=12345`,
    );
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe("12345");
    const wrong = await fetch(
      `${env.apiUrl}/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1`,
    );
    expect(wrong.status).toBe(403);
  });

  test("bad or missing signatures are 401 and store nothing", async () => {
    const before = await storedEvents();
    const raw = JSON.stringify(webhookBody("wamid.signature-test"));
    const tampered = raw.replace('"hi"', '"hi!"');
    expect((await postWebhook(tampered, signPayload(raw, "dev-app-secret"))).status).toBe(401);
    expect((await postWebhook(raw, signPayload(raw, "wrong-secret"))).status).toBe(401);
    expect((await postWebhook(raw, undefined)).status).toBe(401);
    expect((await postWebhook(raw, "sha256=zz")).status).toBe(401);
    expect(await storedEvents()).toBe(before);
  });

  test("a replayed webhook is stored once, and finalizing twice makes one message", async () => {
    const raw = JSON.stringify(webhookBody("wamid.replay-test"));
    const signature = signPayload(raw, "dev-app-secret");
    const before = await storedEvents();
    for (let i = 0; i < 3; i++) expect((await postWebhook(raw, signature)).status).toBe(200);
    expect(await storedEvents()).toBe(before + 1);
    const first = await finalizeInbound(env.deps.db, env.clock, "wamid.replay-test");
    const second = await finalizeInbound(env.deps.db, env.clock, "wamid.replay-test");
    expect(first?.created).toBe(true);
    expect(second).toEqual({ messageId: first!.messageId, tenantId, created: false, feed: false });
    const messages = await env.deps.db
      .selectFrom("messages")
      .select("id")
      .where("provider_message_id", "=", "wamid.replay-test")
      .execute();
    expect(messages).toHaveLength(1);
  });

  test("an unknown phone-number-id is acknowledged and not stored", async () => {
    const before = await storedEvents();
    const response = await fetch(`${env.simulatorUrl}/_sim/inbound`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ phone_number_id: "999", from: "4915123456789", type: "text", text: "x" }),
    });
    // The service takes it with a 200 (the provider would retry anything else) and names the number
    // in its answer; the simulator's control call turns that into a 404 the developer sees.
    expect(response.status).toBe(404);
    const { error } = (await response.json()) as { error: { message: string } };
    expect(error.message).toContain("phone_number_id 999 is not a sender of the service: it answered 200");
    expect(await storedEvents()).toBe(before);
  });
});

describe("finalize", () => {
  async function finalized(providerMessageId: string) {
    const outcome = await finalizeInbound(env.deps.db, env.clock, providerMessageId);
    expect(outcome?.created).toBe(true);
    // The message as the history presents it, with its contact.
    return env.deps.db
      .selectFrom("messages")
      .innerJoin("contacts", "contacts.id", "messages.contact_id")
      .select([
        ...HISTORY_COLUMNS,
        "contacts.id as contact_id",
        "contacts.phone",
        "contacts.name",
        "contacts.last_inbound_at",
      ])
      .where("messages.id", "=", outcome!.messageId)
      .executeTakeFirstOrThrow();
  }

  test("a 10,000-character text with line breaks is stored byte for byte; contact, window, feed", async () => {
    const body = Array.from({ length: 500 }, (_, i) => `line ${String(i).padStart(3, "0")} ü€ — 🙂`)
      .join("\r\n")
      .padEnd(10_000, "x")
      .slice(0, 10_000);
    expect(body.length).toBe(10_000);
    const timestamp = 1_790_000_100;
    const id = await inbound({ type: "text", text: body, timestamp, name: "Ana Pérez" });
    const message = await finalized(id);
    expect(message.text).toBe(body);
    expect(message.preview).toBe(body);
    expect(message).toMatchObject({ type: "text", direction: "inbound", status: null, media_type: null });
    expect(message.phone).toBe("+4915123456789");
    expect(message.name).toBe("Ana Pérez");
    expect(message.last_inbound_at?.getTime()).toBe(timestamp * 1000);
    // Written within the provider's second (its timestamp is whole seconds): see writtenAt.
    expect(Math.floor(message.created_at.getTime() / 1000)).toBe(timestamp);
    const pending = await env.deps.db
      .selectFrom("feed_pending")
      .selectAll()
      .where("message_id", "=", message.id!)
      .execute();
    expect(pending).toHaveLength(1);
    const conversation = await env.deps.db
      .selectFrom("conversations")
      .selectAll()
      .where("contact_id", "=", message.contact_id)
      .executeTakeFirstOrThrow();
    expect(conversation.unread).toBeGreaterThanOrEqual(1);
  });

  test("a reply in the same second as the send it answers comes after it", async () => {
    const from = "4915100000003";
    const first = await finalized(await inbound({ type: "text", text: "hello", from }));
    // The send took place 400 ms into a second; the reply's timestamp is that whole second, and it
    // is finalized 50 ms after the send.
    const second = Math.floor(env.clock.now().getTime() / 1000) + 1;
    const sentAt = new Date(second * 1000 + 400);
    env.clock.set(sentAt);
    await storeMessage(env.deps.db, {
      tenantId,
      senderId: shop.sender.id,
      contactId: first.contact_id,
      text: "Your order has shipped.",
      createdAt: sentAt,
    });
    const replyId = await inbound({ type: "text", text: "thanks!", from, timestamp: second });
    env.clock.set(new Date(sentAt.getTime() + 50));
    const reply = await finalized(replyId);
    expect(reply.created_at.getTime()).toBeGreaterThan(sentAt.getTime());
    expect(Math.floor(reply.created_at.getTime() / 1000)).toBe(second);
  });

  test("the window never moves backwards when an older message arrives late", async () => {
    const newer = await finalized(
      await inbound({ type: "text", text: "newer", timestamp: 1_790_000_500, from: "4915100000002" }),
    );
    const older = await finalized(
      await inbound({ type: "text", text: "older", timestamp: 1_790_000_400, from: "4915100000002" }),
    );
    expect(older.contact_id).toBe(newer.contact_id);
    expect(older.last_inbound_at?.getTime()).toBe(1_790_000_500 * 1000);
  });

  test("image with and without caption, document with filename, audio, video", async () => {
    const captioned = await finalized(await inbound({ type: "image", caption: "my parcel\nis damaged" }));
    expect(captioned).toMatchObject({
      type: "image",
      text: "my parcel\nis damaged",
      media_type: "image",
      media_filename: null,
    });
    expect(captioned.preview).toMatch(/^\[image: image\.[a-z0-9]+\]$/);
    const bare = await finalized(await inbound({ type: "image" }));
    expect(bare.text).toBeNull();
    const document = await finalized(await inbound({ type: "document", filename: "invoice-42.pdf" }));
    expect(document).toMatchObject({
      type: "document",
      preview: "[document: invoice-42.pdf]",
      media_filename: "invoice-42.pdf",
      text: null,
    });
    expect((await finalized(await inbound({ type: "audio" }))).type).toBe("audio");
    expect((await finalized(await inbound({ type: "video", caption: "unboxing" }))).text).toBe("unboxing");
  });

  test("a system message is typed system_<kind>, stays out of the feed and the conversation", async () => {
    const id = await inbound({ type: "system", text: "User changed number", from: "4915100000009" });
    const outcome = await finalizeInbound(env.deps.db, env.clock, id);
    expect(outcome?.feed).toBe(false);
    const message = await env.deps.db
      .selectFrom("messages")
      .select(["type", "text", "contact_id"])
      .where("id", "=", outcome!.messageId)
      .executeTakeFirstOrThrow();
    expect(message.type).toMatch(/^system_[a-z_]+$/);
    const pending = await env.deps.db
      .selectFrom("feed_pending")
      .select("message_id")
      .where("message_id", "=", outcome!.messageId)
      .execute();
    expect(pending).toHaveLength(0);
    const conversation = await env.deps.db
      .selectFrom("conversations")
      .select("contact_id")
      .where("contact_id", "=", message.contact_id)
      .execute();
    expect(conversation).toHaveLength(0);
  });
});

describe("statuses", () => {
  async function outbound(wamid: string | null, status: "accepted" | "sent" = "accepted") {
    return storeMessage(env.deps.db, {
      tenantId,
      senderId: shop.sender.id,
      phone: "+4915100000100",
      providerMessageId: wamid,
      status,
    });
  }

  async function status(wamid: string, value: string, extra: Record<string, unknown> = {}) {
    const result = await simulate("/_sim/status", {
      wamid,
      status: value,
      phone_number_id: shop.phoneNumberId,
      recipient_id: "4915100000100",
      ...extra,
    });
    expect(result.webhook_status).toBe(200);
  }

  test("read before delivered ends read", async () => {
    const id = await outbound("wamid.order-1", "sent");
    await status("wamid.order-1", "read");
    await status("wamid.order-1", "delivered");
    await applyStatusEvents(env.deps.db, env.clock, "wamid.order-1");
    expect(await messageRow(env.deps.db, id)).toMatchObject({ status: "read", failure: null });
  });

  test("failed then delivered ends delivered; failed carries a normalized failure", async () => {
    const id = await outbound("wamid.order-2", "sent");
    await status("wamid.order-2", "failed", {
      errors: [
        { code: 131026, title: "Message undeliverable", error_data: { details: "Receiver is incapable" } },
      ],
    });
    await applyStatusEvents(env.deps.db, env.clock, "wamid.order-2");
    const failed = await messageRow(env.deps.db, id);
    expect(failed.status).toBe("failed");
    expect(failed.failure).toEqual({
      code: "recipient_invalid",
      message: expect.any(String),
      retryable: false,
    });
    await status("wamid.order-2", "delivered");
    await applyStatusEvents(env.deps.db, env.clock, "wamid.order-2");
    expect(await messageRow(env.deps.db, id)).toMatchObject({ status: "delivered", failure: null });
  });

  test("a status for a message not yet known is kept and applied when it appears", async () => {
    await status("wamid.order-3", "delivered");
    expect(await applyStatusEvents(env.deps.db, env.clock, "wamid.order-3")).toBe(0);
    const id = await outbound("wamid.order-3", "sent");
    expect(await applyStatusEvents(env.deps.db, env.clock, "wamid.order-3")).toBe(1);
    expect((await messageRow(env.deps.db, id)).status).toBe("delivered");
  });

  test("a repeated status webhook is stored once", async () => {
    await status("wamid.order-4", "sent");
    await status("wamid.order-4", "sent");
    expect(await statusEventsOf(env.deps.db, "wamid.order-4")).toHaveLength(1);
  });
});

describe("workers and the sweeper (real processes)", () => {
  /** The stored event of `id`, once a finalize worker has finalized it. */
  const finalizedSoon = (id: string) =>
    eventually(async () =>
      env.deps.db
        .selectFrom("inbound_events")
        .select(["finalized_at", "message_id"])
        .where("provider_message_id", "=", id)
        .where("finalized_at", "is not", null)
        .executeTakeFirst(),
    );

  test("finalize and status workers process what the webhook stored", async () => {
    const finalizer = spawnWorker(env, "finalize");
    try {
      const id = await inbound({ type: "text", text: "worker path", from: "4915100000200" });
      const finalizedRow = await finalizedSoon(id);
      expect(finalizedRow.message_id).toMatch(/^msg_/);
    } finally {
      expect(await finalizer.stop()).toBe(0);
    }
  });

  test("Redis flushed between store and finalize: the sweeper finishes the work", async () => {
    // No worker runs: the webhook stores the event and its job waits in Redis...
    const id = await inbound({ type: "text", text: "survives a flush", from: "4915100000300" });
    // The webhook's nudge is the queue's one coalesced drain job, naming the batch's first message.
    const waitingNudge = async () =>
      (await env.deps.queues.finalize.getWaiting()).some((job) => job.data.providerMessageId === id);
    expect(await waitingNudge()).toBe(true);
    // ...then Redis loses everything of this instance.
    await deleteRedisPrefix(env.config.redisPrefix);
    expect(await waitingNudge()).toBe(false);

    env.clock.advance(60);
    const swept = await sweep(env.deps, 10);
    env.clock.set(new Date());
    expect(swept.finalize).toBeGreaterThanOrEqual(1);
    expect(await env.deps.queues.finalize.getJob(jobIdFor("in", id))).toBeDefined();

    const finalizer = spawnWorker(env, "finalize");
    try {
      await finalizedSoon(id);
    } finally {
      await finalizer.stop();
    }
  });

  test("a sweep nudge whose earlier job completed (kept for the dashboard's history) is added again", async () => {
    const id = await inbound({ type: "text", text: "its job completed", from: "4915100000350" });
    await deleteRedisPrefix(env.config.redisPrefix);
    // A job of the sweeper's id that completed without finalizing (its worker lost Postgres, say).
    const queue = env.deps.queues.finalize;
    const jobId = jobIdFor("in", id);
    await queue.add("sweep", { providerMessageId: id }, { jobId });
    await workJob(env, "finalize", jobId, "completed");

    env.clock.advance(60);
    const swept = await sweep(env.deps, 10);
    env.clock.set(new Date());
    expect(swept.finalize).toBeGreaterThanOrEqual(1);
    expect(await queue.getJobState(jobId)).toBe("waiting");
  });

  test("the maintenance worker's sweeper loop re-enqueues on its own", async () => {
    const id = await inbound({ type: "text", text: "found by the loop", from: "4915100000400" });
    await deleteRedisPrefix(env.config.redisPrefix);
    const maintenance = spawnWorker(env, "maintenance", {
      SWEEP_INTERVAL_MS: "200",
      SWEEP_GRACE_SECONDS: "0",
    });
    const finalizer = spawnWorker(env, "finalize");
    try {
      await finalizedSoon(id);
    } finally {
      await Promise.all([maintenance.stop(), finalizer.stop()]);
    }
  });
});
