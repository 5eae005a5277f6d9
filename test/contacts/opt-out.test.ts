/**
 * Opt-out (DESIGN §13): the keyword rule, inbound STOP/START through the finalize step, the
 * provider's 131050 failure (the send's answer, a failed status webhook, the status drain), the
 * opt_out/opt_in routes, and what the panel shows. Real Postgres, Redis and simulator.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import { createApplication } from "../../src/applications/service.ts";
import { buildWebhook, type WebhookAccount, webhookTimestamp } from "../../src/channel/webhook-payloads.ts";
import { optOutKeyword } from "../../src/contacts/opt-out.ts";
import { finalizeInbound, finalizePendingInbound } from "../../src/inbound/finalize.ts";
import { applyPendingStatusEvents } from "../../src/outbound/status.ts";
import type { SenderRow } from "../../src/senders/repository.ts";
import {
  addSender,
  createShop,
  customerWrites,
  ORDER_SHIPPED,
  outboundMessages,
  postMessage,
  receive,
  type Shop,
  webhookAccount,
} from "../support/fixtures.ts";
import {
  type CallResult,
  call,
  createTestEnv,
  deliverOne,
  expectApiError,
  expectScopeRequired,
  getToken,
  postWebhook,
  type TestEnv,
} from "../support/index.ts";
import { type PanelClient, signedInClient } from "../support/panel.ts";

describe("optOutKeyword", () => {
  test.each([
    "stop",
    "STOP",
    " Stop! ",
    "STOP.",
    "stop ?!",
    "\tStopAll\n",
    "unsubscribe",
    "Cancel;",
    "end:",
    "Quit,",
    "stop . ! ",
  ])("%p opts out", (text) => {
    expect(optOutKeyword(text)).toBe("opt_out");
  });

  test.each(["start", " Start! ", "UNSTOP.", "unstop"])("%p opts back in", (text) => {
    expect(optOutKeyword(text)).toBe("opt_in");
  });

  test.each([
    "stop please",
    "please stop",
    "STOP STOP",
    "!stop",
    "stop-all",
    "stops",
    "sto p",
    "ſtop", // long s: upper-cases to S, but is not the letter S
    "STOP 🙏",
    "",
    "   ",
    null,
    undefined,
    "started",
  ])("%p is an ordinary message", (text) => {
    expect(optOutKeyword(text)).toBeUndefined();
  });
});

let env: TestEnv;
let panel: PanelClient;
let tenantId: string;
let sender: SenderRow;
let account: WebhookAccount;
let token: string;
let other: Shop;
let phoneCounter = 0;

beforeAll(async () => {
  // The simulator's own statuses never come within a test: the tests post the statuses they need.
  env = await createTestEnv({ simulator: true, statusDelayMs: 600_000, limits: { token: 10_000 } });
  env.clock.set(new Date(Math.floor(Date.now() / 1000) * 1000));
  const signedIn = await signedInClient(env.app, env.deps, { tenantName: "Opt-out shop" });
  panel = signedIn.client;
  tenantId = signedIn.tenant.id;
  sender = await addSender(env, tenantId, { templates: true });
  account = webhookAccount(sender);
  const app = await createApplication(env.deps.db, {
    tenantId,
    name: "App",
    readLimit: 1000,
    sendLimit: 1000,
  });
  token = await getToken(env.app, app.application.clientId, app.clientSecret);
  other = await createShop(env, "Other shop");
});
afterAll(() => env.close());

const nowSeconds = () => Math.floor(env.clock.now().getTime() / 1000);

/** A number nobody used in this file yet (wa_id form, digits only). */
function freshWaId(): string {
  phoneCounter++;
  return `49151770${String(phoneCounter).padStart(5, "0")}`;
}

/** The customer writes (a signed webhook from the simulator); stored, not finalized yet. */
function customerPosts(
  from: string,
  text: string,
  timestamp = nowSeconds(),
  type: "text" | "image" = "text",
) {
  return customerWrites(env, account.phoneNumberId, {
    from,
    type,
    ...(type === "text" ? { text } : { caption: text }),
    timestamp,
  });
}

/** The customer writes, and the finalize step runs: the contact's id. */
async function customerWrote(from: string, text: string, timestamp = nowSeconds()): Promise<string> {
  return (await receive(env, account, { from, type: "text", text, timestamp })).contactId;
}

async function contactIdOf(waId: string): Promise<string> {
  const row = await env.deps.db
    .selectFrom("contacts")
    .select("id")
    .where("tenant_id", "=", tenantId)
    .where("phone", "=", `+${waId}`)
    .executeTakeFirstOrThrow();
  return row.id;
}

async function optedOutAt(contactId: string): Promise<Date | null> {
  const row = await env.deps.db
    .selectFrom("contacts")
    .select("opted_out_at")
    .where("id", "=", contactId)
    .executeTakeFirstOrThrow();
  return row.opted_out_at;
}

const getContact = (id: string, as = token) => call(env.app, "GET", `/v2/contacts/${id}`, { token: as });
const optOut = (id: string, as = token) => call(env.app, "POST", `/v2/contacts/${id}/opt_out`, { token: as });
const optIn = (id: string, as = token) => call(env.app, "POST", `/v2/contacts/${id}/opt_in`, { token: as });

describe("inbound keywords", () => {
  test("STOP opts the contact out (sendable false inside the window); START opts it back in", async () => {
    const waId = freshWaId();
    const wroteAt = nowSeconds() - 60;
    const contactId = await customerWrote(waId, "Hello", wroteAt);
    expect((await getContact(contactId)).body.messaging).toMatchObject({ sendable: true, opted_out: false });

    await customerWrote(waId, " Stop! ", wroteAt + 1);
    const stopped = await getContact(contactId);
    expect(stopped.status).toBe(200);
    expect(stopped.body.messaging).toEqual({
      sendable: false,
      within_window: true,
      window_expires_at: new Date((wroteAt + 1 + 86_400) * 1000).toISOString().replace(".000Z", "Z"),
      requires_template: true,
      opted_out: true,
    });
    // From the message's own time.
    expect(await optedOutAt(contactId)).toEqual(new Date((wroteAt + 1) * 1000));

    await customerWrote(waId, "start", wroteAt + 2);
    expect((await getContact(contactId)).body.messaging).toMatchObject({
      sendable: true,
      within_window: true,
      requires_template: false,
      opted_out: false,
    });
    expect(await optedOutAt(contactId)).toBeNull();
  });

  test("a second STOP keeps the first opt-out's time", async () => {
    const waId = freshWaId();
    const first = nowSeconds() - 120;
    const contactId = await customerWrote(waId, "STOP", first);
    await customerWrote(waId, "unsubscribe.", first + 60);
    expect(await optedOutAt(contactId)).toEqual(new Date(first * 1000));
  });

  test("only a keyword alone counts: a sentence, or a photo captioned STOP, opts nobody out", async () => {
    const waId = freshWaId();
    const contactId = await customerWrote(waId, "stop please");
    await customerWrote(waId, "Can you stop the delivery?");
    await finalizeInbound(env.deps.db, env.clock, await customerPosts(waId, "STOP", nowSeconds(), "image"));
    expect(await optedOutAt(contactId)).toBeNull();
    expect((await getContact(contactId)).body.messaging.opted_out).toBe(false);
  });

  test("in one finalize batch the latest message of each contact wins", async () => {
    const [a, b, c, d] = [freshWaId(), freshWaId(), freshWaId(), freshWaId()];
    const t = nowSeconds() - 300;
    // a: STOP then START (opted in). b: START then STOP (opted out). c: STOP, an ordinary message
    // after it (still out). d: STOP at the later provider time, though it arrives first.
    await customerPosts(a, "STOP", t);
    await customerPosts(b, "START", t);
    await customerPosts(c, "STOP", t);
    await customerPosts(d, "STOP", t + 10);
    await customerPosts(a, "Start", t + 1);
    await customerPosts(b, "stop", t + 1);
    await customerPosts(c, "thanks, bye", t + 1);
    await customerPosts(d, "START", t + 5);
    const finalized = await finalizePendingInbound(env.deps.db, env.clock);
    expect(finalized.length).toBeGreaterThanOrEqual(8);
    expect(await optedOutAt(await contactIdOf(a))).toBeNull();
    expect(await optedOutAt(await contactIdOf(b))).toEqual(new Date((t + 1) * 1000));
    expect(await optedOutAt(await contactIdOf(c))).toEqual(new Date(t * 1000));
    expect(await optedOutAt(await contactIdOf(d))).toEqual(new Date((t + 10) * 1000));
  });

  test("a provider timestamp in the future opts out from now, not later", async () => {
    const waId = freshWaId();
    const contactId = await customerWrote(waId, "QUIT", nowSeconds() + 3600);
    expect(await optedOutAt(contactId)).toEqual(env.clock.now());
  });
});

describe("POST /contacts/{id}/opt_out and /opt_in", () => {
  test("opt_out returns the Contact opted out; a repeat keeps the first time; opt_in clears it", async () => {
    const waId = freshWaId();
    const contactId = await customerWrote(waId, "Hi", nowSeconds() - 30);
    const out = await optOut(contactId);
    expect(out.status).toBe(200);
    expect(out.body).toMatchObject({
      object: "contact",
      id: contactId,
      phone: `+${waId}`,
      channel: "whatsapp",
      messaging: { sendable: false, within_window: true, requires_template: true, opted_out: true },
    });
    const first = await optedOutAt(contactId);
    expect(first).toEqual(env.clock.now());

    env.clock.advance(5);
    const again = await optOut(contactId);
    expect(again.status).toBe(200);
    expect(again.body.messaging.opted_out).toBe(true);
    expect(await optedOutAt(contactId)).toEqual(first);
    expect((await getContact(contactId)).body).toEqual(again.body);

    const back = await optIn(contactId);
    expect(back.status).toBe(200);
    expect(back.body.messaging).toMatchObject({ sendable: true, opted_out: false, requires_template: false });
    expect(await optedOutAt(contactId)).toBeNull();
    const backAgain = await optIn(contactId);
    expect(backAgain.status).toBe(200);
    expect(backAgain.body).toEqual(back.body);
  });

  test("an empty JSON body or a form is as good as none", async () => {
    const contactId = await customerWrote(freshWaId(), "Hi");
    const json = await call(env.app, "POST", `/v2/contacts/${contactId}/opt_out`, { token, body: {} });
    expect(json.status).toBe(200);
    const empty = await call(env.app, "POST", `/v2/contacts/${contactId}/opt_in`, {
      token,
      rawBody: "",
      headers: { "content-type": "application/json" },
    });
    expect(empty.status).toBe(200);
    expect(empty.body.messaging.opted_out).toBe(false);
  });

  test("an unknown id, another tenant's contact: 404; a malformed id: 400", async () => {
    const contactId = await customerWrote(freshWaId(), "Hi");
    for (const route of [optOut, optIn]) {
      expectApiError(await route("ctc_doesNotExist0000000000"), 404, "resource_missing", "contact_id");
      expectApiError(await route(contactId, other.token), 404, "resource_missing", "contact_id");
      expectApiError(await route("msg_abc"), 400, "parameter_invalid", "contact_id");
    }
    expect(await optedOutAt(contactId)).toBeNull();
  });

  test("they need a token with messaging:send", async () => {
    const contactId = await customerWrote(freshWaId(), "Hi");
    await expectScopeRequired(env, "messaging:send", [
      ["POST", `/v2/contacts/${contactId}/opt_out`],
      ["POST", `/v2/contacts/${contactId}/opt_in`],
    ]);
    expect(await optedOutAt(contactId)).toBeNull();
  });
});

/** A template send to `to`, handed to the provider (the simulator) by the send path. */
async function sendTemplate(to: string): Promise<{ id: string; outcome: string }> {
  const accepted = await postMessage(env.app, token, { to, template: ORDER_SHIPPED });
  expect(accepted.status).toBe(201);
  return { id: accepted.body.id, outcome: await deliverOne(env.deps, accepted.body.id) };
}

async function messageOf(id: string) {
  return env.deps.db
    .selectFrom("messages")
    .select(["status", "failure", "provider_message_id", "contact_id"])
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
}

function failedStatus(providerId: string, code: number): Promise<CallResult> {
  return postWebhook(
    env,
    buildWebhook(account, {
      statuses: [
        {
          id: providerId,
          status: "failed",
          timestamp: webhookTimestamp(),
          recipient_id: "4915177000000",
          errors: [{ code, title: "failed", message: "failed", error_data: { details: "failed" } }],
        },
      ],
    }),
  );
}

describe("the provider's 131050", () => {
  test("a send the provider refuses with 131050 fails with recipient_opted_out and opts the contact out", async () => {
    // The sandbox recipient the simulator refuses with Graph error 131050.
    const { id, outcome } = await sendTemplate("+15550001010");
    expect(outcome).toBe("failed");
    const message = await messageOf(id);
    expect(message.status).toBe("failed");
    expect(message.failure).toMatchObject({ code: "recipient_opted_out", retryable: false });
    expect(message.failure?.message).toContain("131050");
    expect(await optedOutAt(message.contact_id)).toEqual(env.clock.now());
    expect((await getContact(message.contact_id)).body.messaging.opted_out).toBe(true);

    // The next send to them is refused at acceptance.
    const refused = await postMessage(env.app, token, { to: "+15550001010", template: ORDER_SHIPPED });
    expectApiError(refused, 409, "recipient_opted_out", "to");
  });

  test("another permanent failure opts nobody out", async () => {
    const { id, outcome } = await sendTemplate("+15550001001"); // 131026, recipient_invalid
    expect(outcome).toBe("failed");
    const message = await messageOf(id);
    expect(message.failure?.code).toBe("recipient_invalid");
    expect(await optedOutAt(message.contact_id)).toBeNull();
  });

  test("a failed status webhook with 131050 opts the contact out; a replay of it after an opt-in does not", async () => {
    const to = `+${freshWaId()}`;
    const { id, outcome } = await sendTemplate(to);
    expect(outcome).toBe("sent");
    const sent = await messageOf(id);
    expect((await failedStatus(sent.provider_message_id!, 131026)).status).toBe(200);
    // 131026 failed it, without an opt-out.
    expect((await messageOf(id)).failure?.code).toBe("recipient_invalid");
    expect(await optedOutAt(sent.contact_id)).toBeNull();

    const second = await sendTemplate(to);
    const secondRow = await messageOf(second.id);
    expect((await failedStatus(secondRow.provider_message_id!, 131050)).status).toBe(200);
    expect(await messageOf(second.id)).toMatchObject({
      status: "failed",
      failure: { code: "recipient_opted_out", retryable: false },
    });
    expect(await optedOutAt(sent.contact_id)).toEqual(env.clock.now());

    // Opted back in by hand: the provider's retry of the same webhook changes nothing.
    expect((await optIn(sent.contact_id)).status).toBe(200);
    expect((await failedStatus(secondRow.provider_message_id!, 131050)).status).toBe(200);
    expect(await optedOutAt(sent.contact_id)).toBeNull();
  });

  test("a 131050 status that waited for its message (the status drain) opts the contact out", async () => {
    const { id, outcome } = await sendTemplate(`+${freshWaId()}`);
    expect(outcome).toBe("sent");
    const row = await messageOf(id);
    await env.deps.db
      .insertInto("status_events")
      .values({
        provider_message_id: row.provider_message_id!,
        status: "failed",
        provider_timestamp: env.clock.now(),
        errors: JSON.stringify([{ code: 131050, title: "Unable to deliver the message" }]),
        client_reference: null,
        sender_id: sender.id,
      })
      .execute();
    const batch = await applyPendingStatusEvents(env.deps.db, env.clock);
    expect(batch.messages).toBeGreaterThanOrEqual(1);
    expect((await messageOf(id)).failure?.code).toBe("recipient_opted_out");
    expect(await optedOutAt(row.contact_id)).toEqual(env.clock.now());
    const waiting = await sql<{ n: number }>`SELECT count(*)::int AS n FROM status_events`.execute(
      env.deps.db,
    );
    expect(waiting.rows[0]?.n).toBe(0);
  });
});

describe("the panel", () => {
  test("the conversation shows the opt-out and when; the reply box says why nothing can be sent", async () => {
    const waId = freshWaId();
    const contactId = await customerWrote(waId, "Hello there", nowSeconds() - 60);
    const before = await panel.get(`/panel/conversations/${contactId}`);
    expect(before.status).toBe(200);
    expect(before.text).not.toContain("Opted out");
    expect(before.text).toContain('id="reply-body"');

    await customerWrote(waId, "STOP", nowSeconds() - 30);
    // A page open since before: its poll brings the opt-out and the reply box without a form.
    const poll = await panel.get(`/panel/conversations/${contactId}/thread?v=stale&mode=text`, {
      "hx-request": "true",
    });
    expect(poll.status).toBe(200);
    expect(poll.text).toContain('<p id="window-state" class="window-state opted-out" hx-swap-oob="true">');
    expect(poll.text).toContain(
      '<section id="reply" class="card reply" aria-labelledby="reply-title" hx-swap-oob="true">',
    );
    expect(poll.text).toContain('class="warning reply-opted-out"');

    const view = await panel.get(`/panel/conversations/${contactId}`);
    expect(view.status).toBe(200);
    expect(view.text).toContain('<p id="window-state" class="window-state opted-out">');
    expect(view.text).toContain('<span class="badge bad">Opted out</span>');
    expect(view.text).toContain(`datetime="${new Date((nowSeconds() - 30) * 1000).toISOString()}"`);
    expect(view.text).toContain("nothing is sent to this customer until they write START");
    expect(view.text).toContain('class="warning reply-opted-out"');
    expect(view.text).not.toContain('id="reply-body"');
    // The list beside it marks the conversation too.
    expect(view.text).toContain('<span class="window opted-out">');

    // A form drawn before the opt-out, posted now: refused, and said plainly.
    const refused = await panel.post(`/panel/conversations/${contactId}/messages`, {
      kind: "text",
      body: "Are you there?",
      idempotency_key: "panel-0123456789abcdefABCDEF",
    });
    expect(refused.status).toBe(409);
    expect(refused.text).toContain(
      'role="alert">Not sent: Sim Customer opted out of messages (they answered STOP, or were opted out through the API).',
    );
    const htmx = await panel.request("POST", `/panel/conversations/${contactId}/messages`, {
      form: {
        _csrf: panel.csrf,
        kind: "text",
        body: "Hello?",
        idempotency_key: "panel-0123456789abcdefABCDEG",
      },
      headers: { "hx-request": "true" },
    });
    expect(htmx.status).toBe(200);
    expect(htmx.headers.get("x-panel-refusal")).toBe("recipient_opted_out");
    expect(await outboundMessages(env.deps.db, contactId)).toEqual([]);

    // Opted back in: the reply box is back.
    expect((await optIn(contactId)).status).toBe(200);
    const after = await panel.get(`/panel/conversations/${contactId}`);
    expect(after.text).not.toContain("Opted out");
    expect(after.text).toContain('id="reply-body"');
  });
});
