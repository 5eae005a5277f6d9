/**
 * Issue 22, part 4: the panel's Webhooks page (DESIGN §12): a tenant's endpoints only, with their
 * delivery state and last deliveries; create (secret shown once), a test event to a real receiver,
 * replay, rotate, disable and enable, delete; refused input as a message on the page, never a 500.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Value } from "@sinclair/typebox/value";
import { Webhook } from "standardwebhooks";
import { createEventCursorCodec } from "../../src/events/cursor.ts";
import { EVENT_TYPES, EventSchema } from "../../src/events/schemas.ts";
import { currentFeedEpoch } from "../../src/feed/repository.ts";
import { ApiError } from "../../src/http/errors.ts";
import { recentAttempts } from "../../src/push/attempt-log.ts";
import { findEndpoint } from "../../src/push/repository.ts";
import { ENDPOINTS_PER_TENANT } from "../../src/push/schemas.ts";
import { createWebhookEndpoint, type EndpointDeps } from "../../src/push/service.ts";
import { sendTestEvent } from "../../src/push/test-event.ts";
import { createTestEnv, type TestEnv } from "../support/index.ts";
import { type PanelClient, type PanelResponse, postRefused, signedInClient } from "../support/panel.ts";

interface Received {
  body: string;
  headers: Record<string, string>;
}

/** A local receiver (NODE_ENV=development allows http to 127.0.0.1); `answer` decides its reply. */
function startReceiver() {
  const received: Received[] = [];
  let answer: () => Response = () => new Response("ok");
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      received.push({ body: await request.text(), headers: Object.fromEntries(request.headers) });
      return answer();
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hooks`,
    received,
    answer(with_: () => Response) {
      answer = with_;
    },
    stop: () => server.stop(true),
  };
}

let env: TestEnv;
let endpointDeps: EndpointDeps;
let receiver: ReturnType<typeof startReceiver>;
let client: PanelClient;
let tenantId: string;

beforeAll(async () => {
  env = await createTestEnv({ limits: { anonymous: 10_000, token: 10_000 } });
  endpointDeps = { ...env.deps, cursors: createEventCursorCodec(env.config) };
  receiver = startReceiver();
  const signedIn = await signedInClient(env.app, env.deps, { tenantName: "Hook Co" });
  client = signedIn.client;
  tenantId = signedIn.tenant.id;
});
afterAll(async () => {
  receiver?.stop();
  await env.close();
});

function secretOf(page: PanelResponse): string {
  const secret = /<code id="endpoint-secret"[^>]*>([^<]+)<\/code>/.exec(page.text)?.[1];
  if (!secret) throw new Error(`no secret on the page (${page.status})`);
  return secret;
}

/** The page's text with tags dropped and whitespace collapsed, for sentences split by markup. */
function plain(markup: string): string {
  return markup
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

/** The card of one endpoint on the list page. */
function cardOf(page: PanelResponse, endpointId: string): string {
  const start = page.text.lastIndexOf("<section", page.text.indexOf(`id="${endpointId}" aria-labelledby`));
  const end = page.text.indexOf("</section>", start);
  if (start < 0 || end < 0) throw new Error(`no card for ${endpointId}`);
  return page.text.slice(start, end);
}

async function createViaPanel(form: Record<string, string | string[]>) {
  await client.get("/panel/webhooks");
  const page = await client.post("/panel/webhooks", form);
  expect(page.status).toBe(201);
  const id = /<code id="endpoint-id">(we_[0-9A-Za-z]+)<\/code>/.exec(page.text)?.[1] ?? "";
  const row = await findEndpoint(env.deps.db, tenantId, id);
  if (!row) throw new Error("the created endpoint is not on the page");
  return { page, secret: secretOf(page), row };
}

const countEndpoints = async (tenant = tenantId) =>
  (await env.deps.db.selectFrom("webhook_endpoints").select("id").where("tenant_id", "=", tenant).execute())
    .length;

describe("panel: webhooks list and create", () => {
  test("an empty tenant sees an explanation, the form and Webhooks in the navigation", async () => {
    const { client: fresh } = await signedInClient(env.app, env.deps);
    const page = await fresh.get("/panel/webhooks");
    expect(page.status).toBe(200);
    expect(page.headers.get("cache-control")).toBe("no-store");
    expect(page.text).toContain("No endpoints yet");
    expect(page.text).toContain('aria-current="page">Webhooks</a>');
    expect(page.text).toContain('<label for="endpoint-url">URL</label>');
    expect(page.text).toContain("<legend>Event types</legend>");
    for (const type of [
      "message.received",
      "message.sent",
      "message.delivered",
      "message.read",
      "message.failed",
    ])
      expect(page.text).toContain(`name="events" value="${type}"`);
    // Every other page links to it.
    expect((await fresh.get("/panel/senders")).text).toContain('href="/panel/webhooks">Webhooks</a>');
  });

  test("signed out: to the sign-in page; a post without the CSRF token: 403 and nothing made", async () => {
    const anonymous = await env.app.handle(new Request("http://localhost/panel/webhooks"));
    expect(anonymous.status).toBe(303);
    expect(anonymous.headers.get("location")).toBe("/panel/sign-in?next=%2Fpanel%2Fwebhooks");
    const before = await countEndpoints();
    const forged = await client.request("POST", "/panel/webhooks", { form: { url: receiver.url } });
    expect(forged.status).toBe(403);
    expect(await countEndpoints()).toBe(before);
  });

  test("create shows the secret once, with the chosen types; the list shows the endpoint, never the secret", async () => {
    const { page, secret, row } = await createViaPanel({
      url: `  ${receiver.url}  `,
      events: ["message.received", "message.failed"],
      description: "Order <system>",
    });
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(page.headers.get("location")).toBeNull();
    expect(page.text).toContain("will not be shown again");
    expect(page.text).toContain('data-copy="#endpoint-secret"');
    expect(row.url).toBe(receiver.url);
    expect(row.events).toEqual(["message.received", "message.failed"]);
    expect(row.description).toBe("Order <system>");
    expect(row.status).toBe("enabled");

    const list = await client.get("/panel/webhooks");
    expect(list.status).toBe(200);
    expect(list.text).not.toContain(secret);
    const card = cardOf(list, row.id);
    expect(card).toContain(receiver.url);
    expect(card).toContain("Order &lt;system&gt;");
    expect(card).not.toContain("<system>");
    expect(card).toContain('<code class="scope">message.received</code>');
    expect(card).toContain('<code class="scope">message.failed</code>');
    expect(card).not.toContain('<code class="scope">message.sent</code>');
    expect(card).toContain('<span class="badge ok">Enabled</span>');
    expect(plain(card)).toContain("Pending events 0");
    expect(plain(card)).toContain("Oldest pending none pending");
    expect(plain(card)).toContain("Last success never");
    expect(plain(card)).toContain("Last failure none");
    expect(card).toMatch(/<code class="small">evc_[^<]+<\/code>/);
    expect(card).toContain("Nothing posted yet");
  });

  test("no type chosen: every type, including types added later", async () => {
    const { row } = await createViaPanel({ url: `${receiver.url}/all` });
    // Stored as every type (null), not as today's list (issue 42).
    expect(row.events).toBeNull();
    expect(row.description).toBeNull();
    const card = plain(cardOf(await client.get("/panel/webhooks"), row.id));
    expect(card).toContain(`Events Every type, including types added later: ${EVENT_TYPES.join(" ")}`);
  });

  test("a bad URL, an unknown type or a long description: the form again with the reason, nothing made", async () => {
    const before = await countEndpoints();
    await client.get("/panel/webhooks");
    const refused = (form: Record<string, string | string[]>, reason: string) =>
      postRefused(client, "/panel/webhooks", form, reason);
    const notUrl = await refused({ url: "not a url", description: "kept" }, "The URL is not a URL.");
    expect(notUrl.text).toContain("The endpoint was not created.");
    expect(notUrl.text).toContain('value="kept"');
    expect(notUrl.text).toContain('aria-invalid="true" autofocus');

    const refusals: [Record<string, string | string[]>, string][] = [
      [{ url: "ftp://example.com/hooks" }, "The URL must be an http or https URL."],
      [{ url: "https://user:pw@example.com/" }, "The URL must not carry credentials."],
      [{ url: "   " }, "Enter the URL events are posted to."],
      [{ url: receiver.url, events: ["message.eaten"] }, "Choose only the event types listed."],
      [{ url: receiver.url, description: "x".repeat(501) }, "at most 500 characters"],
    ];
    for (const [form, reason] of refusals) await refused(form, reason);

    expect(await countEndpoints()).toBe(before);
  });

  test("at the limit: the reason on the page (409), and the create button is disabled", async () => {
    const full = await signedInClient(env.app, env.deps);
    for (let i = 0; i < ENDPOINTS_PER_TENANT; i++)
      await createWebhookEndpoint(endpointDeps, full.tenant.id, { url: `https://hooks.example.com/${i}` });
    const page = await full.client.get("/panel/webhooks");
    expect(page.text).toContain(`${ENDPOINTS_PER_TENANT} of ${ENDPOINTS_PER_TENANT} endpoints`);
    expect(page.text).toMatch(/class="button primary" disabled>Create endpoint/);
    const refused = await full.client.post("/panel/webhooks", { url: "https://hooks.example.com/17" });
    expect(refused.status).toBe(409);
    expect(refused.text).toContain(`at most ${ENDPOINTS_PER_TENANT} webhook endpoints`);
    expect(await countEndpoints(full.tenant.id)).toBe(ENDPOINTS_PER_TENANT);
  });

  test("the page lists this tenant's endpoints only; another tenant's are 404 by URL too", async () => {
    const other = await signedInClient(env.app, env.deps, { tenantName: "Other Co" });
    const theirs = await createWebhookEndpoint(endpointDeps, other.tenant.id, {
      url: "https://other.example.com/theirs",
    });
    const mine = await client.get("/panel/webhooks");
    expect(mine.text).not.toContain("other.example.com");
    expect(mine.text).not.toContain(theirs.id);
    expect((await other.client.get("/panel/webhooks")).text).toContain("https://other.example.com/theirs");

    expect((await client.get(`/panel/webhooks/${theirs.id}/delete`)).status).toBe(404);
    for (const action of ["test", "rotate-secret", "delete", "replay"]) {
      const response = await client.post(`/panel/webhooks/${theirs.id}/${action}`, { since: "" });
      expect(response.status).toBe(404);
    }
    const disable = await client.post(`/panel/webhooks/${theirs.id}/status`, { status: "disabled" });
    expect(disable.status).toBe(404);
    expect((await client.post("/panel/webhooks/not-an-id/test")).status).toBe(404);
    const row = await findEndpoint(env.deps.db, other.tenant.id, theirs.id);
    expect(row?.status).toBe("enabled");
    expect(receiver.received.some((r) => r.body.includes(theirs.id))).toBe(false);
  });
});

describe("panel: webhook actions", () => {
  test("send a test event: a signed sample reaches the receiver; the outcome and the last deliveries show it", async () => {
    const { secret, row } = await createViaPanel({ url: receiver.url });
    const eventsBefore = await env.deps.db.selectFrom("events").select("seq").execute();
    receiver.received.length = 0;

    const sent = await client.post(`/panel/webhooks/${row.id}/test`);
    expect(sent.status).toBe(303);
    const location = sent.headers.get("location") ?? "";
    expect(location).toMatch(
      new RegExp(`^/panel/webhooks\\?tested=${row.id}&event=evt_test_[0-9a-f]{24}#${row.id}$`),
    );

    expect(receiver.received).toHaveLength(1);
    const delivery = receiver.received[0] as Received;
    const event = new Webhook(secret).verify(delivery.body, delivery.headers) as {
      id: string;
      type: string;
      data: { text: string };
    };
    expect(event.id).toMatch(/^evt_test_[0-9a-f]{24}$/);
    expect(delivery.headers["webhook-id"]).toBe(event.id);
    expect(delivery.headers["content-type"]).toBe("application/json");
    expect(event.type).toBe("message.received");
    expect(event.data.text).toBe("This is a test event");
    // The shape of a real event, so a receiver's parsing is tested too.
    expect(Value.Check(EventSchema, JSON.parse(delivery.body))).toBe(true);
    expect(location).toContain(event.id);

    const page = await client.get(location.replace(/#.*/, ""));
    expect(page.status).toBe(200);
    expect(plain(page.text)).toContain(`Test event acknowledged by ${receiver.url} : HTTP 200 in`);
    const card = cardOf(page, row.id);
    expect(card).toContain(`<code>${event.id}</code>`);
    expect(card).toContain('<span class="badge ok">Acknowledged</span>');
    expect(plain(card)).toMatch(/message\.received 200 \d+ ms Acknowledged/);

    // Outside the event log: no event, the endpoint's position and state untouched.
    expect(await env.deps.db.selectFrom("events").select("seq").execute()).toEqual(eventsBefore);
    const after = await findEndpoint(env.deps.db, tenantId, row.id);
    expect(after?.cursor_seq).toBe(row.cursor_seq);
    expect(after?.last_success_at).toBeNull();
    expect(after?.generation).toBe(row.generation);
  });

  test("a failing receiver: the test event's status and error excerpt show, nothing breaks", async () => {
    const { row } = await createViaPanel({ url: receiver.url });
    receiver.answer(() => new Response("the <b>receiver</b> is broken", { status: 500 }));
    try {
      const sent = await client.post(`/panel/webhooks/${row.id}/test`);
      expect(sent.status).toBe(303);
      const page = await client.get((sent.headers.get("location") ?? "").replace(/#.*/, ""));
      expect(page.status).toBe(200);
      expect(plain(page.text)).toContain(`Test event not acknowledged by ${receiver.url} : HTTP 500 in`);
      expect(page.text).toContain("HTTP 500: the &lt;b&gt;receiver&lt;/b&gt; is broken");
      expect(page.text).not.toContain("<b>receiver</b>");
      expect(cardOf(page, row.id)).toContain('<span class="badge bad">Failed</span>');
    } finally {
      receiver.answer(() => new Response("ok"));
    }
  });

  test("sendTestEvent: nothing listening is a failed outcome; an unknown endpoint is resource_missing", async () => {
    const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
    const url = `http://127.0.0.1:${closed.port}/gone`;
    closed.stop(true);
    const endpoint = await createWebhookEndpoint(endpointDeps, tenantId, { url });
    const attempt = await sendTestEvent(env.deps, tenantId, endpoint.id);
    expect(attempt).toMatchObject({ type: "message.received", status_code: null, outcome: "failed" });
    expect(attempt.error).toStartWith("could not connect");
    const logged = await recentAttempts(env.deps.redis, env.deps.keys, endpoint.id);
    expect(logged[0]).toEqual(attempt);

    const other = await signedInClient(env.app, env.deps);
    const error = await sendTestEvent(env.deps, other.tenant.id, endpoint.id).catch((e) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).code).toBe("resource_missing");
  });

  test("rotate: a new secret shown once; both secrets sign for now", async () => {
    const { secret: old, row } = await createViaPanel({ url: receiver.url });
    const rotated = await client.post(`/panel/webhooks/${row.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    const secret = secretOf(rotated);
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(old);
    expect(rotated.text).toContain("New signing secret");
    expect(rotated.text).toContain("24 hours");
    expect((await client.get("/panel/webhooks")).text).not.toContain(secret);

    receiver.received.length = 0;
    await client.post(`/panel/webhooks/${row.id}/test`);
    const delivery = receiver.received[0] as Received;
    expect(delivery.headers["webhook-signature"]?.split(" ")).toHaveLength(2);
    expect(() => new Webhook(secret).verify(delivery.body, delivery.headers)).not.toThrow();
    expect(() => new Webhook(old).verify(delivery.body, delivery.headers)).not.toThrow();
  });

  test("replay: from the oldest event, from a cursor; a bad cursor is a message on the page", async () => {
    const { row } = await createViaPanel({ url: receiver.url });
    await env.deps.db
      .updateTable("webhook_endpoints")
      .set({ cursor_seq: 7 })
      .where("id", "=", row.id)
      .execute();

    const oldest = await client.post(`/panel/webhooks/${row.id}/replay`, { since: "" });
    expect(oldest.status).toBe(303);
    expect(oldest.headers.get("location")).toBe(`/panel/webhooks?replayed=${row.id}#${row.id}`);
    expect((await findEndpoint(env.deps.db, tenantId, row.id))?.cursor_seq).toBe(0);
    const page = await client.get(`/panel/webhooks?replayed=${row.id}`);
    expect(plain(page.text)).toContain(
      `Replay started: the events after the cursor are being posted to ${receiver.url} again.`,
    );

    const epoch = await currentFeedEpoch(env.deps.db);
    const cursor = endpointDeps.cursors.encode(tenantId, { epoch, seq: 3 });
    const fromCursor = await client.post(`/panel/webhooks/${row.id}/replay`, { since: ` ${cursor} ` });
    expect(fromCursor.status).toBe(303);
    expect((await findEndpoint(env.deps.db, tenantId, row.id))?.cursor_seq).toBe(3);

    const garbage = await client.post(`/panel/webhooks/${row.id}/replay`, { since: "evc_<nonsense>" });
    expect(garbage.status).toBe(400);
    expect(garbage.text).toContain(
      "since is not an event cursor this service gave this account; pass the next_cursor of GET /v2/events, or a webhook endpoint&#39;s delivery.cursor.",
    );
    const card = cardOf(garbage, row.id);
    expect(card).toContain('value="evc_&lt;nonsense&gt;"');
    expect(card).toContain('aria-invalid="true"');

    const other = await signedInClient(env.app, env.deps);
    const theirs = endpointDeps.cursors.encode(other.tenant.id, { epoch, seq: 0 });
    const foreign = await client.post(`/panel/webhooks/${row.id}/replay`, { since: theirs });
    expect(foreign.status).toBe(400);
    expect(foreign.text).toContain("not an event cursor");
  });

  test("disable and enable: the state, a notice, and the reason when delivery disabled it", async () => {
    const { row } = await createViaPanel({ url: receiver.url });
    const disabled = await client.post(`/panel/webhooks/${row.id}/status`, { status: "disabled" });
    expect(disabled.status).toBe(303);
    expect(disabled.headers.get("location")).toBe(`/panel/webhooks?disabled=${row.id}#${row.id}`);
    expect((await findEndpoint(env.deps.db, tenantId, row.id))?.status).toBe("disabled");
    let page = await client.get(`/panel/webhooks?disabled=${row.id}`);
    expect(plain(page.text)).toContain(`${receiver.url} is disabled`);
    let card = cardOf(page, row.id);
    expect(card).toContain('<span class="badge bad">Disabled</span>');
    expect(card).toContain("Disabled by you");
    expect(card).toContain('name="status" value="enabled"');

    const enabled = await client.post(`/panel/webhooks/${row.id}/status`, { status: "enabled" });
    expect(enabled.headers.get("location")).toBe(`/panel/webhooks?enabled=${row.id}#${row.id}`);
    expect((await findEndpoint(env.deps.db, tenantId, row.id))?.status).toBe("enabled");
    page = await client.get(`/panel/webhooks?enabled=${row.id}`);
    expect(plain(page.text)).toContain(`${receiver.url} is enabled`);

    expect((await client.post(`/panel/webhooks/${row.id}/status`, { status: "paused" })).status).toBe(400);

    // What delivery reports: disabled for failing, with the last failure and the lag.
    const failedAt = new Date(env.clock.now().getTime() - 3600_000);
    await env.deps.db
      .updateTable("webhook_endpoints")
      .set({
        status: "disabled",
        disabled_reason: "failing",
        last_failure_at: failedAt,
        last_failure_status: 503,
        last_failure_error: "HTTP 503: <maintenance>",
      })
      .where("id", "=", row.id)
      .execute();
    page = await client.get("/panel/webhooks");
    card = cardOf(page, row.id);
    expect(card).toContain("could not be delivered for 3 days");
    expect(plain(card)).toContain("1 h ago · HTTP 503");
    expect(card).toContain("HTTP 503: &lt;maintenance&gt;");
  });

  test("delete: asked first, then gone with a notice", async () => {
    const { row } = await createViaPanel({ url: `${receiver.url}/delete-me` });
    const confirm = await client.get(`/panel/webhooks/${row.id}/delete`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain("Delete this endpoint?");
    expect(confirm.text).toContain(`${receiver.url}/delete-me`);
    expect(await findEndpoint(env.deps.db, tenantId, row.id)).toBeDefined();

    const deleted = await client.post(`/panel/webhooks/${row.id}/delete`);
    expect(deleted.status).toBe(303);
    expect(deleted.headers.get("location")).toBe(`/panel/webhooks?deleted=${row.id}`);
    expect(await findEndpoint(env.deps.db, tenantId, row.id)).toBeUndefined();
    const page = await client.get(`/panel/webhooks?deleted=${row.id}`);
    expect(page.text).toContain(`Endpoint <code>${row.id}</code> is deleted`);
    expect(page.text).not.toContain(`${receiver.url}/delete-me`);
    expect((await client.post(`/panel/webhooks/${row.id}/delete`)).status).toBe(404);
  });
});

describe("panel: every event type named, each endpoint collapsed to its state and lag (issue 42)", () => {
  /** The summary (always shown) of one endpoint's card. */
  function summaryOf(page: PanelResponse, endpointId: string): string {
    const card = cardOf(page, endpointId);
    const summary = /<summary class="endpoint-summary" id="summary-[^"]+">([\s\S]*?)<\/summary>/.exec(
      card,
    )?.[1];
    if (summary === undefined) throw new Error(`no summary for ${endpointId}`);
    return summary;
  }
  const isOpen = (page: PanelResponse, endpointId: string) =>
    new RegExp(`<details class="endpoint-details" id="details-${endpointId}" open>`).test(page.text);

  test("the introduction lists every event type, message.canceled included, from the one list", async () => {
    const { client: fresh } = await signedInClient(env.app, env.deps);
    const page = await fresh.get("/panel/webhooks");
    const lead = /<p class="lead muted">([\s\S]*?)<\/p>/.exec(page.text)?.[1] ?? "";
    expect(EVENT_TYPES).toContain("message.canceled");
    for (const type of EVENT_TYPES) expect(lead).toContain(`<code>${type}</code>`);
  });

  test("several endpoints: each collapsed, its URL, state and lag in the summary; an action's endpoint open", async () => {
    const { client: own, tenant } = await signedInClient(env.app, env.deps);
    const made = [];
    for (const i of [1, 2, 3]) {
      made.push(
        await createWebhookEndpoint(endpointDeps, tenant.id, {
          url: `https://hooks.example.com/many/${i}`,
          description: `Endpoint ${i}`,
        }),
      );
    }
    const [first, second, third] = made as [(typeof made)[0], (typeof made)[0], (typeof made)[0]];
    await env.deps.db
      .updateTable("webhook_endpoints")
      .set({ status: "disabled", disabled_reason: "failing" })
      .where("id", "=", third.id)
      .execute();

    const page = await own.get("/panel/webhooks");
    expect(page.status).toBe(200);
    for (const endpoint of made) {
      expect(isOpen(page, endpoint.id)).toBe(false);
      const summary = summaryOf(page, endpoint.id);
      expect(summary).toContain(`<h2 id="endpoint-${endpoint.id}" class="mono">${endpoint.url}</h2>`);
      expect(plain(summary)).toContain("Nothing pending");
      // The facts, actions and deliveries are behind the summary, not in it.
      expect(summary).not.toContain("Pending events");
      expect(cardOf(page, endpoint.id)).toContain("Pending events");
    }
    expect(summaryOf(page, first.id)).toContain('<span class="badge ok">Enabled</span>');
    expect(summaryOf(page, third.id)).toContain('<span class="badge bad">Disabled</span>');

    // The endpoint an action was about is open (its outcome in view); the others stay closed.
    const disabled = await own.post(`/panel/webhooks/${second.id}/status`, { status: "disabled" });
    expect(disabled.status).toBe(303);
    const after = await own.get(`/panel/webhooks?disabled=${second.id}`);
    expect(isOpen(after, second.id)).toBe(true);
    expect(isOpen(after, first.id)).toBe(false);
    // A refused replay form is open with its error.
    const refused = await own.post(`/panel/webhooks/${first.id}/replay`, { since: "evc_nonsense" });
    expect(refused.status).toBe(400);
    expect(isOpen(refused, first.id)).toBe(true);
    expect(isOpen(refused, second.id)).toBe(false);
  });

  test("a lone endpoint shows its details open", async () => {
    const { client: own, tenant } = await signedInClient(env.app, env.deps);
    const endpoint = await createWebhookEndpoint(endpointDeps, tenant.id, {
      url: "https://hooks.example.com/lone",
    });
    const page = await own.get("/panel/webhooks");
    expect(isOpen(page, endpoint.id)).toBe(true);
  });
});
