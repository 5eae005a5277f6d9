/**
 * Issue 22: delivery to a real HTTP receiver by the real webhook worker process (DESIGN §12):
 * Standard Webhooks signatures (checked with the reference `standardwebhooks` package), order per
 * contact with contacts in parallel, a receiver down then back, replay from a cursor, rotation, 410.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import {
  buildWebhook,
  type InboundMessage,
  type WebhookAccount,
  webhookTimestamp,
} from "../../src/channel/webhook-payloads.ts";
import { sequenceFeed } from "../../src/feed/sequencer.ts";
import { finalizePendingInbound } from "../../src/inbound/finalize.ts";
import { nudgeEndpointsOf } from "../../src/push/service.ts";
import { createShop } from "../support/fixtures.ts";
import {
  call,
  createTestEnv,
  eventually,
  postWebhook,
  spawnWorker,
  type TestEnv,
  type WorkerProcess,
} from "../support/index.ts";

interface Delivery {
  id: string;
  timestamp: string;
  signature: string;
  body: string;
  event: { id: string; type: string; data: { id: string; text: string | null; contact: { phone: string } } };
}

/** A receiver on this machine: records every post, answers as `answer` says. */
function startReceiver() {
  const deliveries: Delivery[] = [];
  let answer: (delivery: Delivery) => Response | Promise<Response> = () => new Response("ok");
  const handle = async (request: Request) => {
    const body = await request.text();
    const delivery: Delivery = {
      id: request.headers.get("webhook-id") ?? "",
      timestamp: request.headers.get("webhook-timestamp") ?? "",
      signature: request.headers.get("webhook-signature") ?? "",
      body,
      event: JSON.parse(body),
    };
    const response = await answer(delivery);
    if (response.ok) deliveries.push(delivery);
    return response;
  };
  let server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: handle });
  const port = server.port;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    /** Acknowledged deliveries, in the order they were acknowledged. */
    deliveries,
    answer(with_: typeof answer) {
      answer = with_;
    },
    async down() {
      await server.stop(true);
    },
    up() {
      server = Bun.serve({ port, hostname: "127.0.0.1", fetch: handle });
    },
    stop: () => server.stop(true),
  };
}

let env: TestEnv;
let token: string;
let account: WebhookAccount;
let worker: WorkerProcess;
let sequence = 0;

beforeAll(async () => {
  env = await createTestEnv();
  ({ token, account } = await createShop(env, "Acme"));
  worker = spawnWorker(env, "webhook", { WEBHOOK_RETRY_BASE_MS: "100", SWEEP_INTERVAL_MS: "200" });
});
afterAll(async () => {
  await worker?.stop();
  await env.close();
});

/** Customers write: `count` texts from each phone, finalized into messages (and message.received events). */
async function customersWrite(phones: string[], count: number): Promise<void> {
  const messages: InboundMessage[] = [];
  for (let i = 0; i < count; i++) {
    for (const phone of phones) {
      sequence++;
      messages.push({
        from: phone.slice(1),
        id: `wamid.delivery-${sequence}`,
        timestamp: webhookTimestamp(),
        type: "text",
        text: { body: `${phone} #${i}` },
      });
    }
  }
  const response = await postWebhook(
    env,
    buildWebhook(account, {
      contacts: phones.map((phone) => ({ profile: { name: "C" }, wa_id: phone.slice(1) })),
      messages,
    }),
  );
  expect(response.status).toBe(200);
  await finalizePendingInbound(env.deps.db, env.clock);
  // Numbered now, so the test can read them, and the endpoints nudged, as the worker's sequencer does.
  const tick = await sequenceFeed(env.deps.db);
  await nudgeEndpointsOf(env.deps, tick.eventTenants);
  // The worker's own sequencer may have taken some of them (SKIP LOCKED) and not committed yet.
  await eventually(async () => {
    const row = await env.deps.db
      .selectFrom("event_pending")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .executeTakeFirstOrThrow();
    return Number(row.n) === 0;
  });
}

/** An endpoint for message.received events, posting to `url`. */
async function createEndpoint(url: string) {
  const response = await call(env.app, "POST", "/v2/webhook_endpoints", {
    token,
    body: { url, events: ["message.received"] },
  });
  expect(response.status).toBe(201);
  return structuredClone(response.body) as { id: string; secret: string; delivery: { cursor: string } };
}

const endpointState = async (id: string) =>
  (await call(env.app, "GET", `/v2/webhook_endpoints/${id}`, { token })).body;

/** The endpoint's state (GET /webhook_endpoints/{id}) once `reached` holds of it. */
const endpointOnce = (id: string, reached: (state: Awaited<ReturnType<typeof endpointState>>) => boolean) =>
  eventually(async () => {
    const state = await endpointState(id);
    return reached(state) && state;
  });

/** The end of a test: its receiver stopped, its endpoint deleted (the next tests' events are not for it). */
async function retire(receiver: ReturnType<typeof startReceiver>, endpointId: string) {
  await receiver.stop();
  await call(env.app, "DELETE", `/v2/webhook_endpoints/${endpointId}`, { token });
}

/** Every event id of the log after `since`, in log order. */
async function eventIdsAfter(since: string, types = "message.received"): Promise<string[]> {
  const page = await call(env.app, "GET", `/v2/events?since=${since}&limit=500&types=${types}`, { token });
  return page.body.data.map((event: { id: string }) => event.id);
}

describe("webhook delivery", () => {
  test("each event is posted once, signed per Standard Webhooks; in order per contact", async () => {
    const receiver = startReceiver();
    // Contacts are answered at different speeds: order may differ across contacts, never within one.
    receiver.answer(async (delivery) => {
      await Bun.sleep(delivery.event.data.contact.phone.endsWith("1") ? 30 : Math.random() * 5);
      return new Response(null, { status: 204 });
    });
    const endpoint = await createEndpoint(receiver.url);
    const phones = ["+4915100000701", "+4915100000702", "+4915100000703", "+4915100000704"];
    await customersWrite(phones, 6);
    const expected = await eventIdsAfter(endpoint.delivery.cursor);
    expect(expected).toHaveLength(24);
    await eventually(async () => receiver.deliveries.length >= 24, 15_000);

    const verifier = new Webhook(endpoint.secret);
    for (const delivery of receiver.deliveries) {
      const event = verifier.verify(delivery.body, {
        "webhook-id": delivery.id,
        "webhook-timestamp": delivery.timestamp,
        "webhook-signature": delivery.signature,
      }) as { id: string; type: string };
      expect(event.id).toBe(delivery.id);
      expect(event.type).toBe("message.received");
    }
    expect(new Set(receiver.deliveries.map((d) => d.id))).toEqual(new Set(expected));
    expect(receiver.deliveries).toHaveLength(24);
    // Each contact's events arrive in log order (GET /events), whatever the other contacts do.
    const phoneOf = new Map(receiver.deliveries.map((d) => [d.id, d.event.data.contact.phone]));
    for (const phone of phones) {
      const arrived = receiver.deliveries
        .filter((d) => d.event.data.contact.phone === phone)
        .map((d) => d.id);
      expect(arrived).toEqual(expected.filter((id) => phoneOf.get(id) === phone));
      expect(arrived).toHaveLength(6);
    }
    // ...and the contacts went in parallel: the slow one did not hold the others back.
    const slowLast = receiver.deliveries.map((d) => d.event.data.contact.phone).lastIndexOf(phones[0] ?? "");
    expect(slowLast).toBe(23);
    const state = await endpointOnce(
      endpoint.id,
      (s) => s.delivery.pending === 0 && s.delivery.last_success_at !== null,
    );
    expect(state.delivery.oldest_pending_age).toBe(null);
    await retire(receiver, endpoint.id);
  }, 30_000);

  test("a failed post is retried with backoff, holding back that contact's next events only", async () => {
    const receiver = startReceiver();
    let refusals = 3;
    receiver.answer((delivery) => {
      if (delivery.event.data.contact.phone === "+4915100000711" && refusals-- > 0) {
        return new Response("database busy, try later", { status: 500 });
      }
      return new Response("ok");
    });
    const endpoint = await createEndpoint(receiver.url);
    await customersWrite(["+4915100000711", "+4915100000712"], 3);
    await eventually(async () => receiver.deliveries.length >= 6, 15_000);
    // The other contact did not wait for the failing one.
    const phones = receiver.deliveries.map((d) => d.event.data.contact.phone);
    expect(phones.lastIndexOf("+4915100000712")).toBeLessThan(phones.indexOf("+4915100000711"));
    const logOrder = await eventIdsAfter(endpoint.delivery.cursor);
    const ofFailing = receiver.deliveries.filter((d) => d.event.data.contact.phone === "+4915100000711");
    expect(ofFailing.map((d) => d.id)).toEqual(logOrder.filter((id) => ofFailing.some((d) => d.id === id)));
    expect(ofFailing).toHaveLength(3);
    const state = await endpointOnce(endpoint.id, (s) => s.delivery.pending === 0);
    expect(state.delivery.last_failure).toMatchObject({
      status_code: 500,
      error: expect.stringContaining("database busy"),
    });
    await retire(receiver, endpoint.id);
  }, 30_000);

  test("a receiver down for a while, then back, gets every event, once acknowledged", async () => {
    const receiver = startReceiver();
    const endpoint = await createEndpoint(receiver.url);
    await receiver.down();
    await customersWrite(["+4915100000721", "+4915100000722", "+4915100000723"], 4);
    const down = await endpointOnce(endpoint.id, (s) => s.delivery.last_failure !== null);
    expect(down.delivery.last_failure.status_code).toBe(null);
    expect(down.delivery.pending).toBe(12);
    expect(down.delivery.oldest_pending_age).toBeGreaterThanOrEqual(0);
    // More events while it is down.
    await customersWrite(["+4915100000721", "+4915100000724"], 2);
    receiver.up();
    const expected = await eventIdsAfter(endpoint.delivery.cursor);
    expect(expected).toHaveLength(16);
    await eventually(async () => new Set(receiver.deliveries.map((d) => d.id)).size >= 16, 20_000);
    expect(new Set(receiver.deliveries.map((d) => d.id))).toEqual(new Set(expected));
    const state = await endpointOnce(endpoint.id, (s) => s.delivery.pending === 0);
    expect(state.status).toBe("enabled");
    await retire(receiver, endpoint.id);
  }, 40_000);

  test("a receiver back after an outage: its first success releases every contact's wait at once", async () => {
    const receiver = startReceiver();
    // Every post, acknowledged or not: [event id, when, acknowledged].
    const posts: { id: string; at: number; ok: boolean }[] = [];
    let up = false;
    receiver.answer((delivery) => {
      posts.push({ id: delivery.id, at: Date.now(), ok: up });
      return up ? new Response(null, { status: 204 }) : new Response("maintenance", { status: 503 });
    });
    const failuresOf = (id: string | undefined) => posts.filter((post) => post.id === id && !post.ok).length;
    const endpoint = await createEndpoint(receiver.url);
    const [early, late1, late2] = ["+4915100000751", "+4915100000752", "+4915100000753"];
    await customersWrite([early as string], 3);
    const [earlyFirst] = await eventIdsAfter(endpoint.delivery.cursor);
    // The early contact's first event fails 7 times, its wait doubling (base 100 ms): the next is
    // 6.4 s ±20 % after the last; the 8th failure (below) puts it 12.8 s ±20 % away.
    await eventually(async () => failuresOf(earlyFirst) >= 7, 30_000);
    await customersWrite([late1 as string, late2 as string], 2);
    const all = await eventIdsAfter(endpoint.delivery.cursor);
    expect(all).toHaveLength(7);
    const lateFirsts = all.slice(3, 5);
    // The endpoint is paused: the late contacts' events are first posted with the early one's retry.
    await eventually(async () => lateFirsts.every((id) => failuresOf(id) >= 1), 30_000);
    // As the run wrote it: the early contact's own schedule would have it wait several seconds more.
    const earlyRetry = await eventually(async () => {
      const waiting = await env.deps.db
        .selectFrom("webhook_deliveries")
        .select(["next_attempt_at", "attempts"])
        .where("endpoint_id", "=", endpoint.id)
        .where("acknowledged", "=", false)
        .execute();
      const latest = Math.max(...waiting.map((row) => row.next_attempt_at?.getTime() ?? 0));
      return (
        waiting.length === 3 &&
        waiting.every((row) => row.attempts >= 1) &&
        latest > Date.now() + 6000 &&
        latest
      );
    }, 5000);
    up = true;

    // The late contacts' retry (within a second) is the first success: every wait ends with it.
    await eventually(async () => receiver.deliveries.length >= 7, 15_000);
    const firstSuccess = Math.min(...posts.filter((post) => post.ok).map((post) => post.at));
    const lastSuccess = Math.max(...posts.filter((post) => post.ok).map((post) => post.at));
    expect(lastSuccess - firstSuccess).toBeLessThan(1500);
    expect(lastSuccess).toBeLessThan(earlyRetry - 3000);
    // None lost, none twice, each contact's in log order.
    expect(receiver.deliveries.map((d) => d.id).sort()).toEqual([...all].sort());
    for (const phone of [early, late1, late2]) {
      const arrived = receiver.deliveries
        .filter((d) => d.event.data.contact.phone === phone)
        .map((d) => d.id);
      expect(arrived).toEqual(all.filter((id) => arrived.includes(id)));
    }
    const state = await endpointOnce(endpoint.id, (s) => s.delivery.pending === 0);
    expect(state.status).toBe("enabled");
    await retire(receiver, endpoint.id);
  }, 60_000);

  test("a success while another contact's event keeps failing releases nothing: that event keeps its backoff", async () => {
    const receiver = startReceiver();
    const poison = "+4915100000761";
    const healthy = "+4915100000762";
    const poisonPosts: number[] = [];
    receiver.answer((delivery) => {
      if (delivery.event.data.contact.phone !== poison) return new Response(null, { status: 204 });
      poisonPosts.push(Date.now());
      return new Response("cannot process this one", { status: 500 });
    });
    const endpoint = await createEndpoint(receiver.url);
    await customersWrite([poison], 1);
    // Its wait grows to 800 ms ±20 % after 4 failures, then 1.6 s, 3.2 s.
    await eventually(async () => poisonPosts.length >= 4, 20_000);
    const before = poisonPosts.length;
    // The other contact's events succeed all the while (a run each, some after a paused one).
    for (let i = 0; i < 8; i++) {
      await customersWrite([healthy], 1);
      await Bun.sleep(250);
    }
    await eventually(async () => receiver.deliveries.length >= 8, 15_000);
    // About 3 s: a backoff of 0.8 + 1.6 s allows 2 or 3 posts (a recovery adds one at most);
    // a wait reset by each success would post it after every one of them.
    expect(poisonPosts.length - before).toBeLessThanOrEqual(4);
    await retire(receiver, endpoint.id);
  }, 40_000);

  test("replay from a cursor re-delivers exactly the events after it, in order", async () => {
    const receiver = startReceiver();
    const endpoint = await createEndpoint(receiver.url);
    await customersWrite(["+4915100000731"], 3);
    await eventually(async () => receiver.deliveries.length >= 3);
    // The cursor past all three: `pending` 0 alone does not say so, since events acknowledged past
    // the cursor are not pending either (the cursor moves over them with a later write of progress).
    let middle = "";
    await eventually(async () => {
      middle = (await endpointState(endpoint.id)).delivery.cursor;
      return (await eventIdsAfter(middle)).length === 0;
    });
    await customersWrite(["+4915100000731", "+4915100000732"], 2);
    await eventually(async () => receiver.deliveries.length >= 7);
    const after = await eventIdsAfter(middle);
    expect(after).toHaveLength(4);
    receiver.deliveries.length = 0;
    const replayed = await call(env.app, "POST", `/v2/webhook_endpoints/${endpoint.id}/replay`, {
      token,
      body: { since: middle },
    });
    expect(replayed.status).toBe(200);
    await eventually(async () => receiver.deliveries.length >= 4);
    await Bun.sleep(300);
    expect(receiver.deliveries.map((d) => d.id).sort()).toEqual([...after].sort());
    const ofFirst = receiver.deliveries.filter((d) => d.event.data.contact.phone === "+4915100000731");
    expect(ofFirst.map((d) => d.id)).toEqual(after.filter((id) => ofFirst.some((d) => d.id === id)));
    await retire(receiver, endpoint.id);
  }, 30_000);

  test("after rotate_secret the previous secret signs too, and no older one; a 410 disables the endpoint", async () => {
    const receiver = startReceiver();
    const endpoint = await createEndpoint(receiver.url);
    const rotate = () =>
      call(env.app, "POST", `/v2/webhook_endpoints/${endpoint.id}/rotate_secret`, { token });
    // Rotated twice: the new secret and the one it replaced sign; the original stopped at the second
    // rotation (at most two secrets sign at once, issue 42).
    const replaced: string = (await rotate()).body.secret;
    const newSecret: string = (await rotate()).body.secret;
    await customersWrite(["+4915100000741"], 1);
    await eventually(async () => receiver.deliveries.length >= 1);
    const [delivery] = receiver.deliveries;
    if (!delivery) throw new Error("no delivery");
    expect(delivery.signature.split(" ")).toHaveLength(2);
    const headers = {
      "webhook-id": delivery.id,
      "webhook-timestamp": delivery.timestamp,
      "webhook-signature": delivery.signature,
    };
    expect(() => new Webhook(newSecret).verify(delivery.body, headers)).not.toThrow();
    expect(() => new Webhook(replaced).verify(delivery.body, headers)).not.toThrow();
    expect(() => new Webhook(endpoint.secret).verify(delivery.body, headers)).toThrow();

    receiver.answer(() => new Response("gone", { status: 410 }));
    await customersWrite(["+4915100000741"], 1);
    const state = await endpointOnce(endpoint.id, (s) => s.status === "disabled");
    expect(state.disabled_reason).toBe("gone");
    expect(state.delivery.last_failure.status_code).toBe(410);
    // Enabled again, it resumes from its cursor: the event the 410 refused comes now.
    receiver.answer(() => new Response("ok"));
    await call(env.app, "PATCH", `/v2/webhook_endpoints/${endpoint.id}`, {
      token,
      body: { status: "enabled" },
    });
    await eventually(async () => receiver.deliveries.length >= 2);
    await receiver.stop();
  }, 30_000);

  test("metrics: deliveries by outcome and their lag (the worker), endpoints by state and the longest failure (at scrape)", async () => {
    const value = (text: string, pattern: RegExp) =>
      text
        .split("\n")
        .filter((line) => pattern.test(line))
        .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
    const text = await eventually(async () => {
      const scraped = await call(env.app, "GET", "/metrics");
      const body = scraped.text;
      // The worker publishes its metrics every few seconds: wait for a snapshot after the 410.
      const gone = value(body, /^webhook_deliveries_total\{.*outcome="gone"/);
      return value(body, /^webhook_deliveries_total\{.*outcome="acknowledged"/) > 0 && gone >= 1 && body;
    }, 15_000);
    expect(value(text, /^webhook_delivery_lag_seconds_count\{/)).toBeGreaterThan(0);
    expect(value(text, /^webhook_delivery_duration_seconds_count\{/)).toBeGreaterThan(0);
    expect(text).toMatch(/^webhook_endpoints\{.*state="enabled".*\} \d+/m);
    expect(text).toMatch(/^webhook_endpoint_longest_failure_seconds\{.*\} [\d.]+/m);
  }, 30_000);
});
