import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApplication } from "../../src/applications/service.ts";
import type { SenderRow } from "../../src/senders/repository.ts";
import {
  addSender,
  type InboundFields,
  outboundMessages,
  receive,
  type Shop,
  sentTo,
} from "../support/fixtures.ts";
import {
  call,
  createTestEnv,
  eventually,
  getToken,
  nextSecond,
  spawnWorker,
  type TestEnv,
} from "../support/index.ts";
import { expectShows, type PanelClient, type PanelResponse, signedInClient } from "../support/panel.ts";
import { insertContact, insertOutbound } from "../support/reading.ts";

/**
 * The panel's Conversations section, end to end: a real app listening, the real simulator posting
 * signed webhooks, finalize run as the worker runs it, replies through the API's acceptance path.
 */

let env: TestEnv;
let client: PanelClient;
let account: { email: string; password: string; tenant: { id: string }; user: { id: string } };
let sender: SenderRow;
let credentials: { clientId: string; clientSecret: string };
const PHONE_NUMBER_ID = "661000000000001";
const ANA = "4915166000001";
const HX = { "hx-request": "true" };

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { anonymous: 10_000, token: 10_000 } });
  // Whole seconds, as provider timestamps are: "closes in" and "ago" come out exact.
  env.clock.set(new Date(Math.floor(Date.now() / 1000) * 1000));
  const signedIn = await signedInClient(env.app, env.deps, { tenantName: "Acme Shop" });
  client = signedIn.client;
  account = signedIn;
  sender = await addSender(env, signedIn.tenant.id, {
    phoneNumber: "+15550166001",
    phoneNumberId: PHONE_NUMBER_ID,
    wabaId: "761000000000001",
    name: "Acme support",
    templates: true,
  });
  const { application, clientSecret } = await createApplication(env.deps.db, {
    tenantId: signedIn.tenant.id,
    name: "Reader",
    readLimit: 1000,
    sendLimit: 1000,
  });
  credentials = { clientId: application.clientId, clientSecret };
});
afterAll(() => env.close());

const nowSeconds = () => Math.floor(env.clock.now().getTime() / 1000);

/** The customer writes through the simulator (a signed webhook), then finalize runs. */
function customerWrites(fields: Partial<InboundFields>): Promise<{ contactId: string; messageId: string }> {
  return receive(
    env,
    { phoneNumberId: PHONE_NUMBER_ID },
    { from: ANA, type: "text", timestamp: nowSeconds(), ...fields },
  );
}

/** An attribute's value as the browser reads it (the markup escapes `&`). */
function attribute(text: string, pattern: RegExp): string {
  const value = pattern.exec(text)?.[1];
  if (value === undefined) throw new Error(`no match for ${pattern}`);
  return value.replaceAll("&amp;", "&");
}

const listPoll = (page: PanelResponse) =>
  attribute(page.text, /id="conversation-list" class="conversation-list" hx-get="([^"]+)"/);
const threadPoll = (page: PanelResponse) =>
  attribute(page.text, /id="thread" class="thread-region" hx-get="([^"]+)"/);
const idempotencyKey = (page: PanelResponse) =>
  attribute(page.text, /name="idempotency_key" value="([^"]+)"/);

/** The one row of the list for this contact (its <li>). */
function listRow(text: string, contactId: string): string {
  const start = text.indexOf(`id="conversation-${contactId}"`);
  if (start < 0) throw new Error(`no row for ${contactId}`);
  return text.slice(text.lastIndexOf("<li", start), text.indexOf("</li>", start));
}

async function unread(contactId: string) {
  return env.deps.db
    .selectFrom("conversations")
    .select(["unread", "panel_read_at"])
    .where("contact_id", "=", contactId)
    .executeTakeFirstOrThrow();
}

/** How many outbound messages the contact has. */
const outboundCount = async (contactId: string) => (await outboundMessages(env.deps.db, contactId)).length;

/** A text reply to the contact, posted with the key of the reply form on `view`. */
const postText = (contactId: string, body: string, view: PanelResponse) =>
  client.post(`/panel/conversations/${contactId}/messages`, {
    kind: "text",
    body,
    idempotency_key: idempotencyKey(view),
  });

async function sentToSimulator(messageId: string): Promise<number> {
  return (await sentTo(env, PHONE_NUMBER_ID, messageId)).length;
}

describe("the conversation list and view", () => {
  let contactId: string;

  test("an empty account explains where conversations come from", async () => {
    const other = await signedInClient(env.app, env.deps, { tenantName: "Empty" });
    const page = await other.client.get("/panel/conversations");
    expect(page.status).toBe(200);
    expect(page.text).toContain("No conversations yet");
    expect(page.text).toContain("When a customer writes to one of your numbers");
    // Even the empty list polls, so the first message appears without a reload.
    expect(listPoll(page)).toStartWith("/panel/conversations/list?v=");
  });

  test("an inbound message shows in the list with an unread badge and the open window", async () => {
    ({ contactId } = await customerWrites({
      text: "Where is my order?",
      name: "Ana",
      timestamp: nowSeconds() - 3600,
    }));
    const page = await client.get("/panel/conversations");
    expect(page.status).toBe(200);
    const row = listRow(page.text, contactId);
    expect(row).toContain('class="conversation is-unread"');
    expect(row).toContain(`href="/panel/conversations/${contactId}"`);
    expect(row).toContain('<span class="conversation-name">Ana</span>');
    expect(row).toContain('<span class="conversation-phone">+4915166000001</span>');
    expect(row).toContain("Where is my order?");
    expect(row).toContain('<span class="visually-hidden">They wrote:</span>');
    expect(row).toContain(
      '<span class="badge count unread-badge">1<span class="visually-hidden"> unread message</span></span>',
    );
    expect(row).toContain("open · closes in 23 h</span>");
    expect(row).toContain(">1 h ago</time>");
  });

  test("opening the conversation shows it, marks it read, and the badge goes", async () => {
    const view = await client.get(`/panel/conversations/${contactId}`);
    expect(view.status).toBe(200);
    expect(view.text).toContain("<h1>Ana</h1>");
    expect(view.text).toMatch(/<li class="message inbound" id="message-msg_\w+" data-type="text">/);
    expect(view.text).toContain('<p class="message-text">Where is my order?</p>');
    expect(view.text).toContain(
      '<ol class="thread" role="log" aria-label="Messages with Ana, oldest first">',
    );
    expect(view.text).toContain('<span class="badge ok">Window open</span>');
    expect(view.text).toContain('<span>closes in 23 h <span class="muted">');
    // Free text while the window is open: a labelled textarea; templates are offered too (issue 24).
    expect(view.text).toContain('<label for="reply-body">Message to Ana</label>');
    expect(view.text).toMatch(/<textarea id="reply-body" name="body" rows="3" required maxlength="4096"/);
    expect(view.text).toContain('<h3 id="reply-template-title">Or send a template</h3>');
    expect(view.text).toContain('id="reply-template"');
    expect(idempotencyKey(view)).toMatch(/^panel-[0-9A-Za-z]{22}$/);

    const summary = await unread(contactId);
    expect(summary.unread).toBe(0);
    expect(summary.panel_read_at?.getTime()).toBe(env.clock.now().getTime());

    const list = await client.get("/panel/conversations");
    const row = listRow(list.text, contactId);
    expect(row).not.toContain("unread-badge");
    expect(row).toContain('class="conversation"');
  });

  test("the thread poll answers 204 while nothing changed, then the new message (and keeps it read)", async () => {
    const view = await client.get(`/panel/conversations/${contactId}`);
    const poll = threadPoll(view);
    expect(poll).toStartWith(`/panel/conversations/${contactId}/thread?v=`);
    expect(poll).toContain("&mode=text");
    const same = await client.get(poll, HX);
    expect(same.status).toBe(204);
    expect(same.text).toBe("");

    env.clock.advance(60);
    await customerWrites({ text: "Hello again" });
    expect((await unread(contactId)).unread).toBe(1);

    const changed = await client.get(poll, HX);
    expect(changed.status).toBe(200);
    expect(changed.text).toStartWith('<div id="thread" class="thread-region" hx-get=');
    expect(changed.text).toContain('<p class="message-text">Hello again</p>');
    expect(changed.text).toContain(
      '<p id="thread-announce" hx-swap-oob="innerHTML">1 new message from Ana</p>',
    );
    expect(changed.text).toContain('<p id="window-state" class="window-state open" hx-swap-oob="true">');
    // Same mode: the reply box (and whatever is being typed in it) is left alone.
    expect(changed.text).not.toContain('id="reply"');
    // Watching the conversation keeps it read.
    expect((await unread(contactId)).unread).toBe(0);
    // The answer carries the new version: polling it again is 204.
    const next = threadPoll({ ...changed, text: changed.text });
    expect(next).not.toBe(poll);
    expect((await client.get(next, HX)).status).toBe(204);
  });

  test("the list poll answers 204 while nothing changed, then the new conversation state", async () => {
    const page = await client.get("/panel/conversations");
    const poll = listPoll(page);
    expect((await client.get(poll, HX)).status).toBe(204);

    env.clock.advance(60);
    const bo = await customerWrites({ from: "4915166000002", text: "Bo here", name: "Bo" });
    const changed = await client.get(poll, HX);
    expect(changed.status).toBe(200);
    // The list page's tab title first (the unread count, issue 24), then the list.
    expect(changed.text).toMatch(
      /^<title>\(\d+\) Conversations · Messaging panel<\/title><div id="conversation-list" class="conversation-list" hx-get=/,
    );
    const row = listRow(changed.text, bo.contactId);
    expect(row).toContain("Bo here");
    expect(row).toContain("unread-badge");
    // Newest first: Bo above Ana.
    expect(changed.text.indexOf(bo.contactId)).toBeLessThan(changed.text.indexOf(contactId));
    expect(changed.text).toContain(
      '<p id="conversations-announce" hx-swap-oob="innerHTML">New messages: 1 unread message</p>',
    );
    expect((await client.get(listPoll(changed), HX)).status).toBe(204);
  });

  test("media placeholders with captions, statuses as text, failure reasons", async () => {
    env.clock.advance(60);
    await customerWrites({ type: "document", filename: "invoice.pdf", caption: "see attached" });
    const tenant = { tenantId: account.tenant.id, sender };
    await insertOutbound(env, tenant, {
      contactId,
      text: "We could not deliver this",
      status: "failed",
      failure: { code: "recipient_invalid", message: "The number is not on WhatsApp.", retryable: false },
      createdAt: env.clock.now(),
    });
    const view = await client.get(`/panel/conversations/${contactId}`);
    // An inline SVG icon, not an emoji (an empty box without an emoji font); a received document is
    // a download (issue 24, test/inbound/inbound-media.test.ts).
    expect(view.text).toMatch(
      /<p class="message-media"><a class="message-download" href="[^"]+\/media" download><svg class="icon"[^>]*aria-hidden="true"[^>]*>.*?<\/svg> Download invoice\.pdf<\/a><\/p>/,
    );
    expect(view.text).not.toContain("📄");
    expect(view.text).toContain('<p class="message-text">see attached</p>');
    expect(view.text).toMatch(/<li class="message outbound failed" id="message-msg_\w+" data-type="text">/);
    expect(view.text).toContain(
      '<span class="badge message-status bad" data-status="failed"><span class="visually-hidden">Status: </span>Failed</span>',
    );
    expect(view.text).toContain(
      '<p class="message-failure"><strong>Not delivered:</strong> The number is not on WhatsApp. <a class="failure-doc" href="/v2/docs#failure-recipient_invalid">What <code>recipient_invalid</code> means</a></p>',
    );
    // Oldest first: the document before the failed reply.
    const thread = view.text.slice(view.text.indexOf('<ol class="thread"'));
    expect(thread.indexOf("invoice.pdf")).toBeLessThan(thread.indexOf("We could not deliver this"));
  });

  test("HTML in what customers send is shown as text", async () => {
    const evil = await customerWrites({
      from: "4915166000003",
      text: '<img src=x onerror="alert(1)"><script>alert(2)</script>',
      name: "<b>Eve</b>",
    });
    const list = await client.get("/panel/conversations");
    const view = await client.get(`/panel/conversations/${evil.contactId}`);
    for (const page of [list, view]) {
      expect(page.text).not.toContain("<img src=x");
      expect(page.text).not.toContain("<script>alert");
      expect(page.text).not.toContain("<b>Eve</b>");
      expect(page.text).toContain("&lt;b&gt;Eve&lt;/b&gt;");
    }
    expect(view.text).toContain(
      '<p class="message-text">&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;</p>',
    );
  });

  test("the latest 100 messages, and the earlier ones behind a link", async () => {
    const many = await customerWrites({
      from: "4915166000004",
      text: "message 0",
      name: "Many",
      timestamp: nowSeconds() - 500,
    });
    const tenant = { tenantId: account.tenant.id, sender };
    for (let i = 1; i <= 104; i++) {
      await insertOutbound(env, tenant, {
        contactId: many.contactId,
        text: `message ${i}`,
        status: "delivered",
        createdAt: new Date((nowSeconds() - 500 + i) * 1000),
      });
    }
    const view = await client.get(`/panel/conversations/${many.contactId}`);
    expect(view.text.match(/<li class="message /g)?.length).toBe(100);
    expect(view.text).toContain(">message 104</p>");
    expect(view.text).toContain(">message 5</p>");
    expect(view.text).not.toContain(">message 4</p>");
    const earlier = attribute(view.text, /<a id="thread-earlier" href="([^"]+)">Earlier messages<\/a>/);
    const older = await client.get(earlier);
    expect(older.status).toBe(200);
    expect(older.text.match(/<li class="message /g)?.length).toBe(5);
    expect(older.text).toContain(">message 0</p>");
    expect(older.text).not.toContain('id="thread-earlier"');
    expect(older.text).toContain(`<a id="thread-latest" href="/panel/conversations/${many.contactId}">`);
    // An earlier page is history: it does not poll.
    expect(older.text).not.toContain("/thread?v=");
  });
});

describe("replying inside the window", () => {
  let contactId: string;

  beforeAll(async () => {
    env.clock.advance(60);
    ({ contactId } = await customerWrites({ from: "4915166000010", text: "Can you help?", name: "Cleo" }));
  });

  test("a reply is sent once through the API's path even when the same form is posted twice", async () => {
    await nextSecond();
    const view = await client.get(`/panel/conversations/${contactId}`);
    const form = {
      kind: "text",
      body: "Of course!\nWhat is your order number?",
      idempotency_key: idempotencyKey(view),
    };
    const first = await client.post(`/panel/conversations/${contactId}/messages`, form);
    expect(first.status).toBe(303);
    expect(first.headers.get("location")).toBe(`/panel/conversations/${contactId}`);
    const again = await client.post(`/panel/conversations/${contactId}/messages`, form);
    expect(again.status).toBe(303);

    const sent = await outboundMessages(env.deps.db, contactId);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({
      type: "text",
      text: "Of course!\nWhat is your order number?",
      status: "accepted",
    });
    // The panel user stands in for the application: messages.application_id names who replied.
    expect(sent[0]!.application_id).toBe(account.user.id);

    const token = await getToken(env.app, credentials.clientId, credentials.clientSecret);
    const history = await call(env.app, "GET", `/v2/contacts/${contactId}/messages?order=desc&limit=1`, {
      token,
    });
    expect(history.status).toBe(200);
    expect(history.body.data[0]).toMatchObject({
      id: sent[0]!.id,
      direction: "outbound",
      type: "text",
      text: "Of course!\nWhat is your order number?",
    });

    const worker = spawnWorker(env, "send");
    try {
      await eventually(async () => (await sentToSimulator(sent[0]!.id!)) === 1, 15_000);
      await Bun.sleep(300);
      expect(await sentToSimulator(sent[0]!.id!)).toBe(1);
    } finally {
      await worker.stop();
    }

    const after = await client.get(`/panel/conversations/${contactId}`);
    expect(after.text).toContain('<p class="message-text">Of course!\nWhat is your order number?</p>');
    // A fresh form: a new key for the next message.
    expect(idempotencyKey(after)).not.toBe(form.idempotency_key);
  });

  test("with htmx: the reply box comes back empty and focused, with the thread swapped beside it", async () => {
    await nextSecond();
    const view = await client.get(`/panel/conversations/${contactId}`);
    const result = await client.request("POST", `/panel/conversations/${contactId}/messages`, {
      form: {
        _csrf: client.csrf,
        kind: "text",
        body: "Sent with htmx",
        idempotency_key: idempotencyKey(view),
      },
      headers: HX,
    });
    expect(result.status).toBe(200);
    expect(result.text).toStartWith('<section id="reply" class="card reply"');
    expect(result.text).toMatch(/<textarea id="reply-body"[^>]* autofocus><\/textarea>/);
    expect(result.text).not.toContain(idempotencyKey(view));
    expect(result.text).toContain('<div id="thread" class="thread-region" hx-get=');
    expect(result.text).toContain('hx-swap-oob="true"><ol class="thread"');
    expect(result.text).toContain('<p class="message-text">Sent with htmx</p>');
    expect((await outboundMessages(env.deps.db, contactId)).map((m) => m.text)).toContain("Sent with htmx");
  });

  test("a used form posted again with other text is not sent; it comes back with a new key", async () => {
    await nextSecond();
    const view = await client.get(`/panel/conversations/${contactId}`);
    const key = idempotencyKey(view);
    const path = `/panel/conversations/${contactId}/messages`;
    expect((await client.post(path, { kind: "text", body: "First", idempotency_key: key })).status).toBe(303);
    const before = await outboundCount(contactId);
    const reused = await client.post(path, { kind: "text", body: "Second", idempotency_key: key });
    expect(reused.status).toBe(400);
    expect(reused.text).toContain('role="alert">This form was already used to send a message');
    expect(reused.text).toContain(">Second</textarea>");
    expect(idempotencyKey(reused)).not.toBe(key);
    expect(await outboundCount(contactId)).toBe(before);
  });

  test("a blank message is refused in the form, nothing is sent", async () => {
    const view = await client.get(`/panel/conversations/${contactId}`);
    const before = await outboundCount(contactId);
    const blank = await postText(contactId, "   ", view);
    expect(blank.status).toBe(400);
    expect(blank.text).toContain(
      '<p class="error" id="reply-error" role="alert">Write a message before sending.</p>',
    );
    expect(blank.text).toMatch(/<textarea id="reply-body"[^>]* aria-invalid="true">/);
    expect(await outboundCount(contactId)).toBe(before);
  });

  test("a post without the CSRF token is refused and sends nothing", async () => {
    const view = await client.get(`/panel/conversations/${contactId}`);
    const before = await outboundCount(contactId);
    const forged = await client.request("POST", `/panel/conversations/${contactId}/messages`, {
      form: { kind: "text", body: "forged", idempotency_key: idempotencyKey(view) },
    });
    expect(forged.status).toBe(403);
    const wrong = await client.request("POST", `/panel/conversations/${contactId}/messages`, {
      form: { _csrf: "not-the-token", kind: "text", body: "forged", idempotency_key: idempotencyKey(view) },
      headers: HX,
    });
    expect(wrong.status).toBe(403);
    expect(await outboundCount(contactId)).toBe(before);
  });

  test("another tenant's user sees none of it: an empty list, and 404 by URL", async () => {
    const other = await signedInClient(env.app, env.deps, { tenantName: "Rival" });
    const list = await other.client.get("/panel/conversations");
    expect(list.status).toBe(200);
    expect(list.text).not.toContain(contactId);
    expect(list.text).not.toContain("Cleo");
    expect(list.text).toContain("No conversations yet");

    const unknown = await other.client.get("/panel/conversations/ctc_0000000000000000000000");
    const view = await other.client.get(`/panel/conversations/${contactId}`);
    expect(view.status).toBe(404);
    expect(view.text).not.toContain("Cleo");
    // Exactly the page an unknown id gets (but for the request id): no hint that it exists.
    const strip = (text: string) => text.replace(/req_\w+/g, "req");
    expect(strip(view.text)).toBe(strip(unknown.text));

    const fragment = await other.client.get(`/panel/conversations/${contactId}/thread?v=x&mode=text`, HX);
    expect(fragment.status).toBe(404);
    expect(fragment.text).not.toContain("Cleo");
    const before = await outboundCount(contactId);
    const post = await other.client.post(`/panel/conversations/${contactId}/messages`, {
      kind: "text",
      body: "hijack",
      idempotency_key: "panel-AAAAAAAAAAAAAAAAAAAAAA",
    });
    expect(post.status).toBe(404);
    expect(await outboundCount(contactId)).toBe(before);
    // A row of this tenant's list is not a way in either.
    const listFragment = await other.client.get(`/panel/conversations/list?current=${contactId}`, HX);
    expect(listFragment.status).toBe(200);
    expect(listFragment.text).not.toContain(`id="conversation-${contactId}"`);
    expect(listFragment.text).not.toContain("Cleo");
  });
});

describe("a closed window", () => {
  let contactId: string;
  let view: PanelResponse;
  const templateId = async (name: string, language: string) =>
    (
      await env.deps.db
        .selectFrom("templates")
        .select("id")
        .where("sender_id", "=", sender.id)
        .where("name", "=", name)
        .where("language", "=", language)
        .executeTakeFirstOrThrow()
    ).id;

  beforeAll(async () => {
    env.clock.advance(60);
    ({ contactId } = await customerWrites({ from: "4915166000020", text: "Thanks!", name: "Dev" }));
    env.clock.advance(25 * 3600);
    // The session (12 h) ended meanwhile: sign in again.
    await client.signIn(account.email, account.password);
    await client.get("/panel/conversations");
    view = await client.get(`/panel/conversations/${contactId}`);
  });

  test("the list says closed; the page offers approved templates only, no free text", async () => {
    const list = await client.get("/panel/conversations");
    expect(listRow(list.text, contactId)).toContain(
      '<span class="window closed"><span class="visually-hidden">Reply window: </span>closed</span>',
    );
    expect(view.status).toBe(200);
    expect(view.text).toContain('<span class="badge warn">Window closed</span>');
    expect(view.text).toContain('<h2 id="reply-title">Reply</h2>');
    expect(view.text).toContain('<h3 id="reply-template-title">Send a template</h3>');
    expect(view.text).toContain("The 24-hour window is closed");
    expect(view.text).not.toContain("<textarea");
    expect(view.text).toContain('<label for="reply-template">Template</label>');
    const options = [...view.text.matchAll(/<option value="(tpl_\w+)">([^<]+)<\/option>/g)].map((m) => m[2]);
    // Every approved template, media headers included (their link is asked for); pending and
    // rejected ones not at all.
    expect(options).toEqual([
      "appointment_reminder (en) · utility",
      "delivery_video (en) · utility",
      "invoice_ready (en) · utility",
      "login_code (en) · authentication",
      "order_shipped (de) · utility",
      "order_shipped (en) · utility",
      "welcome (en) · marketing",
    ]);
    expect(view.text).not.toContain("Not available here");
    expect(view.text).not.toContain("summer_sale");
    expect(view.text).not.toContain("old_promo");
    expect(threadPoll(view)).toContain("&mode=template");
  });

  test("choosing a template shows one labelled input per variable (without and with htmx)", async () => {
    const id = await templateId("appointment_reminder", "en");
    const page = await client.get(`/panel/conversations/${contactId}?template=${id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain(`<option value="${id}" selected>`);
    const names = [...page.text.matchAll(/<input type="text" id="(reply-var-[\w-]+)" name="([\w.]+)"/g)].map(
      (m) => [m[1], m[2]],
    );
    expect(names).toEqual([
      ["reply-var-header-1", "header.1"],
      ["reply-var-body-1", "body.1"],
      ["reply-var-body-2", "body.2"],
      ["reply-var-buttons-0", "buttons.0"],
    ]);
    for (const [fieldId] of names) expect(page.text).toContain(`<label for="${fieldId}">`);
    // The preview marks each variable with the input it comes from (panel.js fills it as it is typed).
    expect(page.text).toContain(
      'See you on <mark class="var" data-var="body.1" data-placeholder="{{1}}">{{1}}</mark> at <mark class="var" data-var="body.2" data-placeholder="{{2}}">{{2}}</mark>.',
    );

    const fragment = await client.get(`/panel/conversations/${contactId}?template=${id}`, {
      ...HX,
      "hx-target": "template-fields",
    });
    expect(fragment.status).toBe(200);
    expect(fragment.text).toStartWith('<fieldset id="template-fields" class="template-fields">');
    expect(fragment.text).toContain('name="buttons.0"');
    expect(fragment.text).not.toContain("<html");
  });

  test("free text is refused with the window-closed message; nothing is sent, no quota is used", async () => {
    const day = env.clock.now().toISOString().slice(0, 10).replaceAll("-", "");
    const quotaKey = env.deps.keys.dailyQuota(account.tenant.id, "whatsapp", day);
    const quotaBefore = await env.deps.redis.get(quotaKey);
    await nextSecond();
    const before = await outboundCount(contactId);
    const refused = await postText(contactId, "Are you still there?", view);
    expect(refused.status).toBe(409);
    expectShows(refused, [
      '<p class="error" id="reply-error" role="alert">Free text can only be sent within 24 hours of the customer&#39;s last message; send an approved template.</p>',
      // The form it comes back with is the template picker; what was typed is kept as a draft beside it.
      'id="reply-template"',
      '<div id="reply-draft" class="reply-draft" role="group" tabindex="-1" aria-labelledby="reply-draft-note">',
      '<blockquote id="reply-draft-text" class="reply-draft-text">Are you still there?</blockquote>',
      "It cannot be sent as free text until Dev writes again",
    ]);
    expect(await outboundCount(contactId)).toBe(before);

    const htmx = await client.request("POST", `/panel/conversations/${contactId}/messages`, {
      form: { _csrf: client.csrf, kind: "text", body: "Hello?", idempotency_key: idempotencyKey(view) },
      headers: HX,
    });
    // htmx swaps only 2xx answers: the refusal comes as the reply box with its alert.
    expect(htmx.status).toBe(200);
    expect(htmx.headers.get("x-panel-refusal")).toBe("messaging_window_closed");
    expect(htmx.text).toContain('role="alert">Free text can only be sent within 24 hours');
    expect(htmx.text).toContain(
      '<blockquote id="reply-draft-text" class="reply-draft-text">Hello?</blockquote>',
    );
    // A page drawn without a refused text has its (empty) draft note hidden until panel.js fills it.
    expect(view.text).toContain('aria-labelledby="reply-draft-note" hidden>');

    // Every attempt went through the send admission: the panel user has an application's 3 per second.
    const third = { kind: "text", body: "Hello???", idempotency_key: idempotencyKey(view) };
    expect((await client.post(`/panel/conversations/${contactId}/messages`, third)).status).toBe(409);
    const limited = await client.post(`/panel/conversations/${contactId}/messages`, third);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(limited.text).toContain('role="alert">Too many messages at once: at most 3 per second.');

    expect(await outboundCount(contactId)).toBe(before);
    // A refused send gives its reserved unit of the daily quota back.
    expect(Number((await env.deps.redis.get(quotaKey)) ?? 0)).toBe(Number(quotaBefore ?? 0));
  });

  test("a template with its variables is sent; bad variables are shown at their input", async () => {
    await nextSecond();
    const id = await templateId("order_shipped", "en");
    const page = await client.get(`/panel/conversations/${contactId}?template=${id}`);
    const key = idempotencyKey(page);
    /** order_shipped to Dev, for the order number given. */
    const sendForOrder = (order: string) =>
      client.post(`/panel/conversations/${contactId}/messages`, {
        kind: "template",
        template: id,
        "body.1": "Dev",
        "body.2": order,
        idempotency_key: key,
      });

    const missing = await sendForOrder("");
    expect(missing.status).toBe(400);
    expect(missing.text).toContain('role="alert">Fill in every variable of the template.</p>');
    expect(missing.text).toMatch(/name="body\.2" value=""[^>]* aria-invalid="true"/);
    expect(missing.text).toContain('name="body.1" value="Dev"');

    const invalid = await sendForOrder("A-1\nB-2");
    expect(invalid.status).toBe(400);
    expect(invalid.text).toContain("template.variables.body.2 may hold at most 1024 characters");
    expect(invalid.text).toMatch(/name="body\.2"[^>]* aria-invalid="true"/);

    const ok = await sendForOrder("A-1001");
    expect(ok.status).toBe(303);
    const sent = await outboundMessages(env.deps.db, contactId);
    expect(sent.at(-1)).toMatchObject({ type: "template", text: "Hi Dev, your order A-1001 has shipped." });
    const after = await client.get(`/panel/conversations/${contactId}`);
    expect(after.text).toContain(
      '<span class="message-kind" aria-hidden="true">Template · order_shipped</span>',
    );
    expect(after.text).toContain("Hi Dev, your order A-1001 has shipped.");
  });

  test("a template with a media header is sent with the link typed; a missing or private link is refused at its input", async () => {
    await nextSecond();
    const id = await templateId("invoice_ready", "en");
    const page = await client.get(`/panel/conversations/${contactId}?template=${id}`);
    expect(page.text).toContain(
      '<label for="reply-header-link">Document link <span class="muted">(the header)</span></label>',
    );
    expect(page.text).toMatch(
      /<input type="url" id="reply-header-link" name="header_link" value="" required maxlength="2048" pattern="https:\/\/\.\+"/,
    );
    expect(page.text).toContain(
      '<input type="text" id="reply-header-filename" name="header_filename" value=""',
    );
    // The preview has the header's place (panel.js fills it from the link as it is typed).
    expect(page.text).toContain('<p class="template-header template-media" data-media-preview="document">');
    const path = `/panel/conversations/${contactId}/messages`;
    const form = {
      kind: "template",
      template: id,
      "body.1": "INV-2041",
      idempotency_key: idempotencyKey(page),
    };
    const before = await outboundCount(contactId);

    const missing = await client.post(path, { ...form, header_link: " " });
    expect(missing.status).toBe(400);
    expect(missing.text).toContain(
      'role="alert">Give the link of the document the template&#39;s header shows.</p>',
    );
    expect(missing.text).toMatch(
      /id="reply-header-link"[^>]* aria-describedby="reply-header-link-hint reply-error" aria-invalid="true">/,
    );
    expect(missing.text).toContain('name="body.1" value="INV-2041"');

    const local = await client.post(path, { ...form, header_link: "https://127.0.0.1/invoice.pdf" });
    expect(local.status).toBe(400);
    expect(local.text).toContain(
      "The document link must not be a private, loopback or link-local address: give a public https link",
    );
    expect(local.text).toContain('name="header_link" value="https://127.0.0.1/invoice.pdf"');
    expect(await outboundCount(contactId)).toBe(before);

    const link = "https://files.example.com/invoices/INV-2041.pdf";
    const ok = await client.post(path, { ...form, header_link: link, header_filename: "Invoice 2041.pdf" });
    expect(ok.status).toBe(303);
    const sent = await outboundMessages(env.deps.db, contactId);
    expect(sent).toHaveLength(before + 1);
    const row = await env.deps.db
      .selectFrom("messages")
      .select(["content", "media_type", "media_filename", "text"])
      .where("id", "=", sent.at(-1)!.id)
      .executeTakeFirstOrThrow();
    expect(row.text).toBe("Your invoice INV-2041 is ready.");
    expect(row.content?.components).toMatchObject({
      header: { type: "document", link, filename: "Invoice 2041.pdf" },
    });
    expect([row.media_type, row.media_filename]).toEqual(["document", "Invoice 2041.pdf"]);
  });

  test("when the customer writes again, the poll brings back the free-text box", async () => {
    const poll = threadPoll(await client.get(`/panel/conversations/${contactId}`));
    await customerWrites({ from: "4915166000020", text: "Got it, one more question" });
    const changed = await client.get(poll, HX);
    expect(changed.status).toBe(200);
    // Only the free-text part is replaced: the template part (what is typed in it) stays.
    expect(changed.text).toContain(
      `<div id="reply-text" class="reply-text" data-draft-for="${contactId}" hx-swap-oob="true">`,
    );
    expect(changed.text).not.toContain('id="reply"');
    expect(changed.text).not.toContain('id="reply-template-part"');
    expect(changed.text).toContain('<textarea id="reply-body"');
    expect(changed.text).not.toContain("autofocus");
    expect(changed.text).toContain('<span class="badge ok">Window open</span>');
  });
});

describe("finding conversations, message details, retries, starting one (issue 24)", () => {
  let tenant: Pick<Shop, "tenantId" | "sender">;
  let yan: string; // the last message failed; the window closed two days ago
  let zoe: string; // unread, window open
  let xia: string; // a message waiting for a retry
  let retryId: string;
  let templateMessageId: string;

  const listIds = (text: string) =>
    [...text.matchAll(/id="conversation-(ctc_\w+)"/g)].map((match) => match[1] ?? "");

  beforeAll(async () => {
    tenant = { tenantId: account.tenant.id, sender };
    env.clock.advance(60);
    ({ contactId: yan } = await customerWrites({
      from: "4915166000031",
      text: "Old question",
      name: "Yannick Weber",
      timestamp: nowSeconds() - 2 * 86_400,
    }));
    await insertOutbound(env, tenant, {
      contactId: yan,
      text: "Your parcel is on its way",
      status: "failed",
      failure: { code: "recipient_invalid", message: "The number is not on WhatsApp.", retryable: false },
      createdAt: env.clock.now(),
    });
    env.clock.advance(1);
    ({ contactId: zoe } = await customerWrites({
      from: "4915166000032",
      text: "Is it in stock?",
      name: "Zoë Quinn",
    }));
    env.clock.advance(1);
    ({ contactId: xia } = await customerWrites({ from: "4915166000033", text: "Hello", name: "Xia" }));
    retryId =
      (await insertOutbound(env, tenant, {
        contactId: xia,
        text: "We are on it",
        status: "accepted",
        createdAt: env.clock.now(),
        retrying: {
          attempts: 2,
          notBefore: new Date(env.clock.now().getTime() + 90_000),
          lastError: {
            code: "provider_rate_limited",
            message: "WhatsApp throttled the send.",
            retryable: true,
          },
        },
      })) ?? "";
    // Xia's conversation is read; Zoë's is not.
    await client.get(`/panel/conversations/${xia}`);
  });

  test("a conversation whose last message failed is marked in the list", async () => {
    const list = await client.get("/panel/conversations");
    const row = listRow(list.text, yan);
    expect(row).toContain('class="conversation is-failed"');
    expect(row).toContain(
      '<span class="badge bad failed-marker"><span aria-hidden="true">!</span> Failed<span class="visually-hidden">: the last message was not delivered</span></span>',
    );
    expect(listRow(list.text, zoe)).not.toContain("failed-marker");
  });

  test("filters: unread, window open, failed; each a link that the poll keeps", async () => {
    const all = await client.get("/panel/conversations");
    expect(all.text).toContain('<a id="filter-all" href="/panel/conversations" aria-current="page">All</a>');
    expect(all.text).toContain('<a id="filter-unread" href="/panel/conversations?filter=unread">Unread</a>');

    const unread = await client.get("/panel/conversations?filter=unread");
    expect(unread.text).toContain(
      '<a id="filter-unread" href="/panel/conversations?filter=unread" aria-current="page">',
    );
    expect(listIds(unread.text)).toContain(zoe);
    expect(listIds(unread.text)).not.toContain(xia);
    expect(listIds(unread.text)).not.toContain(yan);
    expect(listPoll(unread)).toContain("filter=unread");

    const open = await client.get("/panel/conversations?filter=open");
    expect(listIds(open.text)).toContain(zoe);
    expect(listIds(open.text)).toContain(xia);
    expect(listIds(open.text)).not.toContain(yan);

    const failed = await client.get("/panel/conversations?filter=failed");
    expect(listIds(failed.text)).toContain(yan);
    expect(listIds(failed.text)).not.toContain(zoe);
    expect(listIds(failed.text)).not.toContain(xia);

    // The poll with the filter: 204 while nothing changed, and the filtered list when it did.
    const poll = listPoll(failed);
    expect((await client.get(poll, HX)).status).toBe(204);
    env.clock.advance(1);
    await customerWrites({ from: "4915166000031", text: "Still nothing?" });
    const changed = await client.get(poll, HX);
    expect(changed.status).toBe(200);
    // Yannick's last message is now his own: no longer failed, so no longer listed.
    expect(listIds(changed.text)).not.toContain(yan);

    const unknown = await client.get("/panel/conversations?filter=nonsense");
    expect(unknown.status).toBe(200);
    expect(unknown.text).toContain('<a id="filter-all" href="/panel/conversations" aria-current="page">');
  });

  test("search by name (any case, accents as typed) or by phone digits, within the tenant", async () => {
    const byName = await client.get("/panel/conversations?q=zo%C3%AB");
    expect(listIds(byName.text)).toEqual([zoe]);
    expect(byName.text).toContain('value="zoë"');
    expect(listPoll(byName)).toContain("q=zo%C3%AB");

    const part = await client.get("/panel/conversations?q=WEBER");
    expect(listIds(part.text)).toEqual([yan]);

    for (const q of ["+49 151 66000033", "66000033", "0151 66000033"]) {
      const byPhone = await client.get(`/panel/conversations?q=${encodeURIComponent(q)}`);
      expect(listIds(byPhone.text)).toEqual([xia]);
    }
    // LIKE's wildcards are searched for literally.
    const wildcard = await client.get("/panel/conversations?q=%25");
    expect(listIds(wildcard.text)).toEqual([]);
    expect(wildcard.text).toContain("No conversations matching “%”");

    // Search and filter together, and the filter links keep the search.
    const both = await client.get("/panel/conversations?filter=unread&q=xia");
    expect(listIds(both.text)).toEqual([]);
    expect(both.text).toContain('<a id="filter-open" href="/panel/conversations?filter=open&amp;q=xia">');
    expect(both.text).toContain('<input type="hidden" name="filter" value="unread">');

    const other = await signedInClient(env.app, env.deps, { tenantName: "Searcher" });
    const foreign = await other.client.get("/panel/conversations?q=Zo");
    expect(foreign.text).not.toContain("Quinn");
  });

  test("a conversation's sidebar has the list's filters and search, and keeps the open conversation", async () => {
    const plain = await client.get(`/panel/conversations/${xia}`);
    // The list page's toolbar (once), narrowing this page's sidebar: the conversation stays open.
    expect(plain.text.match(/class="list-toolbar"/g)).toHaveLength(1);
    expect(plain.text).toContain(
      `<a id="filter-all" href="/panel/conversations/${xia}" aria-current="page">All</a>`,
    );
    expect(plain.text).toContain(
      `<form class="list-search" role="search" method="get" action="/panel/conversations/${xia}">`,
    );
    expect(plain.text).not.toContain("is-pinned");

    const searched = await client.get(`/panel/conversations/${xia}?q=weber`);
    expect(searched.status).toBe(200);
    expect(searched.text).toContain("<h1>Xia</h1>");
    expect(searched.text).toContain('id="conversation-search" name="q" value="weber"');
    // Yannick matches; Xia does not, but is open: listed, marked as such; Zoë is not listed.
    expect(listIds(searched.text).sort()).toEqual([xia, yan].sort());
    expect(listRow(searched.text, xia)).toContain('class="conversation is-pinned"');
    expect(listRow(searched.text, xia)).toContain('aria-current="page"');
    expect(listRow(searched.text, xia)).toContain(
      '<span class="pinned-note">shown because it is open</span>',
    );
    expect(listRow(searched.text, yan)).not.toContain("pinned");
    // Rows keep the narrowing (the conversation they open is narrowed alike), so does the way back.
    expect(listRow(searched.text, yan)).toContain(`href="/panel/conversations/${yan}?q=weber"`);
    expect(searched.text).toContain('<p class="conversation-back"><a href="/panel/conversations?q=weber">');
    expect(searched.text).toContain(
      `<a id="filter-unread" href="/panel/conversations/${xia}?filter=unread&amp;q=weber">Unread</a>`,
    );
    // The poll keeps the open conversation listed too.
    const poll = listPoll(searched);
    expect(poll).toContain(`current=${xia}`);
    expect(poll).toContain("q=weber");
    expect((await client.get(poll, HX)).status).toBe(204);
    const changed = await client.get(poll.replace(/v=[^&]+/, "v=stale"), HX);
    expect(listIds(changed.text).sort()).toEqual([xia, yan].sort());

    // Opening an unread conversation from the "Unread" filter reads it; it stays beside its thread.
    const unread = await client.get(`/panel/conversations/${zoe}?filter=unread`);
    expect(listIds(unread.text)).toContain(zoe);
    expect(listRow(unread.text, zoe)).toContain("is-pinned");
  });

  test("a conversation older than the sidebar's first page is listed beside it all the same", async () => {
    const other = await signedInClient(env.app, env.deps, { tenantName: "Many conversations" });
    const many = { tenantId: other.tenant.id, sender: await addSender(env, other.tenant.id) };
    const ids: string[] = [];
    const start = env.clock.now().getTime() - 3_600_000;
    for (let i = 0; i < 26; i++) {
      const contact = await insertContact(
        env,
        many,
        `+4915166001${String(i).padStart(3, "0")}`,
        `Customer ${i}`,
      );
      await insertOutbound(env, many, { contactId: contact.id, createdAt: new Date(start + i * 60_000) });
      ids.push(contact.id);
    }
    const oldest = ids[0]!;
    const list = await other.client.get("/panel/conversations");
    expect(listIds(list.text)).not.toContain(oldest);
    const page = await other.client.get(`/panel/conversations/${oldest}`);
    const listed = listIds(page.text);
    expect(listed).toHaveLength(26);
    expect(listed.at(-1)).toBe(oldest);
    expect(listRow(page.text, oldest)).toContain("is-pinned");
    expect(listRow(page.text, oldest)).toContain('aria-current="page"');
  });

  test("the tab title carries the unread count, and the list poll updates it", async () => {
    const total = await env.deps.db
      .selectFrom("conversations")
      .select((eb) => eb.fn.sum<number>("unread").as("sum"))
      .where("tenant_id", "=", account.tenant.id)
      .executeTakeFirstOrThrow();
    const count = Number(total.sum);
    expect(count).toBeGreaterThan(0);
    const page = await client.get("/panel/conversations");
    expect(page.text).toContain(`<title>(${count}) Conversations · Messaging panel</title>`);

    const poll = listPoll(page);
    env.clock.advance(1);
    await customerWrites({ from: "4915166000032", text: "Hello?" });
    const changed = await client.get(poll, HX);
    expect(changed.status).toBe(200);
    expect(changed.text).toStartWith(`<title>(${count + 1}) Conversations · Messaging panel</title>`);
    // A conversation's sidebar poll leaves that page's own title alone.
    const sidebar = await client.get(`/panel/conversations/list?current=${xia}`, HX);
    expect(sidebar.text).not.toContain("<title>");
  });

  test("a message's details: its id to copy, its template, its timeline with times", async () => {
    // A template sent through the panel: its name and language are kept with the message.
    const templateId = (
      await env.deps.db
        .selectFrom("templates")
        .select("id")
        .where("sender_id", "=", sender.id)
        .where("name", "=", "order_shipped")
        .where("language", "=", "de")
        .executeTakeFirstOrThrow()
    ).id;
    const view = await client.get(`/panel/conversations/${xia}?template=${templateId}`);
    const key = attribute(
      view.text,
      /<form id="reply-template-form"[\s\S]*?name="idempotency_key" value="([^"]+)"/,
    );
    await nextSecond();
    const sent = await client.post(`/panel/conversations/${xia}/messages`, {
      kind: "template",
      template: templateId,
      "body.1": "Xia",
      "body.2": "B-7",
      idempotency_key: key,
    });
    expect(sent.status).toBe(303);
    templateMessageId = (await outboundMessages(env.deps.db, xia)).at(-1)?.id ?? "";
    expect(templateMessageId).toMatch(/^msg_/);

    const page = await client.get(`/panel/conversations/${xia}`);
    const item = page.text.slice(page.text.indexOf(`id="message-${templateMessageId}"`));
    expect(item).toContain('<span class="message-kind" aria-hidden="true">Template · order_shipped</span>');
    expect(item).toContain(
      `<details class="message-details" id="details-${templateMessageId}" hx-get="/panel/conversations/${xia}/messages/${templateMessageId}" hx-trigger="toggle once"`,
    );
    expect(item).toContain(
      `<code id="id-${templateMessageId}">${templateMessageId}</code> <button type="button" class="button subtle copy" id="copy-${templateMessageId}" data-copy="#id-${templateMessageId}">Copy id</button>`,
    );
    expect(item).toContain('<dt>Template</dt><dd>order_shipped <span class="muted">(de)</span></dd>');
    // Exact times are written in UTC and shown in the browser's zone by panel.js.
    expect(item).toMatch(/<time class="local-time" datetime="[^"]+Z" title="\d{4}-\d\d-\d\d \d\d:\d\d UTC">/);

    // The event log's records make the timeline (sent, delivered, read: when each was recorded).
    const created = (
      await env.deps.db
        .selectFrom("messages")
        .select("created_at")
        .where("id", "=", templateMessageId)
        .executeTakeFirstOrThrow()
    ).created_at;
    const at = (seconds: number) => new Date(created.getTime() + seconds * 1000);
    await env.deps.db
      .insertInto("events")
      .values(
        (["message.sent", "message.delivered", "message.read"] as const).map((type, i) => ({
          tenant_id: account.tenant.id,
          seq: 1_000_000 + i,
          id: `evt_issue24test${i}${templateMessageId.slice(-8)}`,
          type,
          message_id: templateMessageId,
          status: type.slice("message.".length),
          failure: null,
          created_at: at(2 + i * 60),
        })),
      )
      .execute();
    const fragment = await client.get(`/panel/conversations/${xia}/messages/${templateMessageId}`, HX);
    expect(fragment.status).toBe(200);
    expect(fragment.text).toStartWith('<div class="message-timeline">');
    const steps = [
      ...fragment.text.matchAll(
        /<span class="step">([^<]+)<\/span> <time class="local-time" datetime="([^"]+)"/g,
      ),
    ].map((m) => [m[1], m[2]]);
    expect(steps).toEqual([
      ["Accepted", created.toISOString()],
      ["Sent", at(2).toISOString()],
      ["Delivered", at(62).toISOString()],
      ["Read", at(122).toISOString()],
    ]);
    // Without a script, the same details are a page of their own.
    const full = await client.get(`/panel/conversations/${xia}/messages/${templateMessageId}`);
    expect(full.status).toBe(200);
    expect(full.text).toContain("<h1>Message details</h1>");
    expect(full.text).toContain(`<code id="id-${templateMessageId}">${templateMessageId}</code>`);
    expect(full.text).toContain('<span class="step">Read</span>');

    // Another tenant, or another contact's conversation, finds nothing.
    expect((await client.get(`/panel/conversations/${zoe}/messages/${templateMessageId}`, HX)).status).toBe(
      404,
    );
    const other = await signedInClient(env.app, env.deps, { tenantName: "Peeker" });
    expect((await other.client.get(`/panel/conversations/${xia}/messages/${templateMessageId}`)).status).toBe(
      404,
    );
  });

  test("a status without its recorded time says what is known: the message's last change", async () => {
    const id = await insertOutbound(env, tenant, {
      contactId: zoe,
      text: "Long ago",
      status: "delivered",
      createdAt: env.clock.now(),
    });
    const fragment = await client.get(`/panel/conversations/${zoe}/messages/${id}`, HX);
    expect(fragment.text).toContain('<span class="step">Delivered</span>');
    expect(fragment.text).toContain("the message's last change; earlier status times are no longer kept");
  });

  test("a message waiting for a retry says so: attempts, next attempt, last error and its docs", async () => {
    const page = await client.get(`/panel/conversations/${xia}`);
    const item = page.text.slice(page.text.indexOf(`id="message-${retryId}"`));
    expect(page.text).toContain(`<li class="message outbound retrying" id="message-${retryId}"`);
    expect(item).toContain(
      '<span class="badge message-status warn" data-status="retrying"><span class="visually-hidden">Status: </span>Retrying</span>',
    );
    expect(item).toMatch(
      /<p class="message-retrying"><strong>Retrying:<\/strong> 2 attempts so far, next at <time class="local-time" datetime="[^"]+" title="[^"]+">[^<]+<\/time>\. Last error: WhatsApp throttled the send\. <a class="failure-doc" href="\/v2\/docs#failure-provider_rate_limited">What <code>provider_rate_limited<\/code> means<\/a><\/p>/,
    );
    const fragment = await client.get(`/panel/conversations/${xia}/messages/${retryId}`, HX);
    expect(fragment.text).toContain(
      '<li class="retrying"><p class="message-retrying"><strong>Retrying:</strong>',
    );
  });

  test("start a conversation with a phone number and a template", async () => {
    const list = await client.get("/panel/conversations");
    expect(list.text).toContain(
      '<a id="new-conversation-link" class="button primary" href="/panel/conversations/new">',
    );
    const blank = await client.get("/panel/conversations/new");
    expect(blank.status).toBe(200);
    expect(blank.text).toContain('<label for="reply-template">Template</label>');
    const templateId = attribute(blank.text, /<option value="(tpl_\w+)">order_shipped \(en\)/);

    const fields = await client.get(`/panel/conversations/new?sender=${sender.id}&template=${templateId}`, {
      ...HX,
      "hx-target": "template-fields",
    });
    expect(fields.text).toStartWith('<fieldset id="template-fields" class="template-fields">');
    expect(fields.text).toContain('data-var="body.1"');

    const page = await client.get(`/panel/conversations/new?template=${templateId}`);
    expect(page.text).toContain('<label for="new-to">Phone number</label>');
    const key = idempotencyKey(page);
    const form = {
      kind: "template",
      sender: sender.id,
      template: templateId,
      "body.1": "Wim",
      "body.2": "W-1",
      idempotency_key: key,
    };
    const missing = await client.post("/panel/conversations/new", { ...form, to: "" });
    expect(missing.status).toBe(400);
    expect(missing.text).toContain('role="alert">Enter the customer&#39;s phone number.</p>');
    expect(missing.text).toMatch(/<input type="tel" id="new-to"[^>]* aria-invalid="true">/);
    // What was typed stays.
    expect(missing.text).toContain('name="body.1" value="Wim"');

    const invalid = await client.post("/panel/conversations/new", { ...form, to: "12" });
    expect(invalid.status).toBe(400);
    expect(invalid.text).toContain("to must be a phone number in E.164 form");

    await nextSecond();
    const sent = await client.post("/panel/conversations/new", { ...form, to: "+49 151 66000040" });
    expect(sent.status).toBe(303);
    const location = sent.headers.get("location") ?? "";
    expect(location).toMatch(/^\/panel\/conversations\/ctc_\w+$/);
    const contactId = location.split("/").at(-1) ?? "";
    const messages = await outboundMessages(env.deps.db, contactId);
    expect(messages).toHaveLength(1);
    expect(messages[0]).toMatchObject({ type: "template", text: "Hi Wim, your order W-1 has shipped." });
    expect(messages[0]!.application_id).toBe(account.user.id);
    // The same form again: the same message, not a second one.
    const again = await client.post("/panel/conversations/new", { ...form, to: "+49 151 66000040" });
    expect(again.headers.get("location")).toBe(location);
    expect(await outboundMessages(env.deps.db, contactId)).toHaveLength(1);
  });
});
