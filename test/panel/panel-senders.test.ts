import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApplication } from "../../src/applications/service.ts";
import { CHANNEL } from "../../src/channel/provider.ts";
import { utcDay } from "../../src/clock.ts";
import { highlightVariables } from "../../src/panel/template-view.ts";
import { type SenderRow, setSenderActive } from "../../src/senders/repository.ts";
import { upsertTemplates } from "../../src/templates/repository.ts";
import { setMessageRetention } from "../../src/tenants/repository.ts";
import { addSender, postMessage } from "../support/fixtures.ts";
import { call, createTestEnv, getToken, type TestEnv } from "../support/index.ts";
import { expectShows, type PanelClient, signedInClient } from "../support/panel.ts";

let env: TestEnv;
let client: PanelClient;
let tenantId: string;
let shop: SenderRow;
let retired: SenderRow;
let token: string;
const connectedSender = (tenant: string, name: string | null, phoneNumber: string, sync = true) =>
  addSender(env, tenant, { name, phoneNumber, templates: sync });

function sendTemplate(to: string) {
  return postMessage(env.app, token, {
    to,
    sender: shop.id,
    template: { name: "order_shipped", language: "en", variables: { body: ["Ana", "A-1001"] } },
  });
}

/** The page's text with tags dropped and whitespace collapsed, for sentences split by markup. */
function plain(markup: string): string {
  return markup
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { anonymous: 10_000, token: 10_000 } });
  const signedIn = await signedInClient(env.app, env.deps, { tenantName: "Shop Co" });
  client = signedIn.client;
  tenantId = signedIn.tenant.id;
  await env.deps.db.updateTable("tenants").set({ daily_quota: 5 }).where("id", "=", tenantId).execute();
  shop = await connectedSender(tenantId, "Shop", "+15550100021");
  retired = await connectedSender(tenantId, null, "+15550100022", false);
  await setSenderActive(env.deps.db, retired.id, false);
  const { application, clientSecret } = await createApplication(env.deps.db, {
    tenantId,
    name: "Sender",
    readLimit: 1000,
    sendLimit: 1000,
  });
  token = await getToken(env.app, application.clientId, clientSecret);
});
afterAll(() => env.close());

describe("variable highlighting", () => {
  test("escapes first, then marks each {{n}} and {{name}}", () => {
    expect(highlightVariables("Hi {{1}}, order {{order_id}} & {{2}}").value).toBe(
      'Hi <mark class="var">{{1}}</mark>, order <mark class="var">{{order_id}}</mark> &amp; <mark class="var">{{2}}</mark>',
    );
    expect(highlightVariables('<img src=x onerror="a">{{1}}</mark>').value).toBe(
      '&lt;img src=x onerror=&quot;a&quot;&gt;<mark class="var">{{1}}</mark>&lt;/mark&gt;',
    );
    expect(highlightVariables("{{ not a var }} {1} {{}}").value).toBe("{{ not a var }} {1} {{}}");
  });
});

describe("panel: senders and templates", () => {
  test("lists the tenant's senders, active and inactive, with their details", async () => {
    const page = await client.get("/panel/senders");
    expect(page.status).toBe(200);
    expect(page.text).toContain('aria-current="page">Senders &amp; templates</a>');
    const text = plain(page.text);
    expect(text).toContain("Shop +15550100021");
    expect(page.text).toContain(shop.provider_phone_number_id);
    expect(page.text).toContain(retired.provider_phone_number_id);
    expect(page.text).toContain('<span class="badge ok">Active</span>');
    expect(page.text).toContain('<span class="badge">Inactive</span>');
    expect(text).toContain("Templates synced just now");
    expect(text).toContain("Templates synced never");
    expect(text).toContain("Templates have not been synced yet");
    expect(text).toContain("1 active sender, 1 inactive");
  });

  test("templates with status badges, header formats and highlighted variables", async () => {
    const page = await client.get("/panel/senders");
    expectShows(page, [
      '<span class="badge ok" title="APPROVED">Approved</span>',
      '<span class="badge warn" title="PENDING">Pending</span>',
      '<span class="badge bad" title="REJECTED">Rejected</span>',
      'Hi <mark class="var">{{1}}</mark>, your order <mark class="var">{{2}}</mark> has shipped.',
      'Hallo <mark class="var">{{1}}</mark>, deine Bestellung <mark class="var">{{2}}</mark> wurde versandt.',
      // A TEXT header and a URL button show their variables too.
      'Reminder for <mark class="var">{{1}}</mark>',
      'https://example.com/a/<mark class="var">{{1}}</mark>',
      'data-label="Header"><div class="cell">Document</div>',
      'data-label="Header"><div class="cell">Video</div>',
      "<code>summer_sale</code>",
    ]);
    expect(plain(page.text)).toContain("7 of 9 approved");
  });

  test("template text from the provider is escaped before variables are marked", async () => {
    const now = env.clock.now();
    await upsertTemplates(env.deps.db, [
      {
        id: "tpl_hostile00000000000000001",
        tenant_id: tenantId,
        sender_id: shop.id,
        provider_template_id: "hostile",
        name: "zz_<b>bold</b>",
        language: "en",
        category: "UTILITY",
        status: "PENDING",
        components: JSON.stringify([{ type: "BODY", text: '<script>alert(1)</script> "{{1}}" & {{2}}' }]),
        variables: JSON.stringify({ body: ["1", "2"], header: [], buttons: [] }),
        preview: '<script>alert(1)</script> "{{1}}" & {{2}}',
        header_format: null,
        updated_at: now,
      },
    ]);
    const page = await client.get("/panel/senders");
    expect(page.text).not.toContain("<script>alert(1)");
    expect(page.text).not.toContain("<b>bold</b>");
    expect(page.text).toContain("zz_&lt;b&gt;bold&lt;/b&gt;");
    expect(page.text).toContain(
      '&lt;script&gt;alert(1)&lt;/script&gt; &quot;<mark class="var">{{1}}</mark>&quot; &amp; <mark class="var">{{2}}</mark>',
    );
    await env.deps.db.deleteFrom("templates").where("id", "=", "tpl_hostile00000000000000001").execute();
  });

  test("today's quota and per-sender counts after sending; Postgres counts when Redis has no counter", async () => {
    const before = plain((await client.get("/panel/senders")).text);
    expect(before).toContain("0 of 5 sent today");
    expect(before).toContain("resets 00:00 UTC");
    expect(before).toContain("Sent today 0 messages accepted since 00:00 UTC");

    expect((await sendTemplate("+4915100000101")).status).toBe(201);
    expect((await sendTemplate("+4915100000102")).status).toBe(201);

    const page = await client.get("/panel/senders");
    expect(page.text).toMatch(
      /<meter id="quota-whatsapp" min="0" max="5" value="2"[^>]*>2 of 5 sent today<\/meter>/,
    );
    expect(page.text).toContain('<label for="quota-whatsapp">WhatsApp</label>');
    const text = plain(page.text);
    expect(text).toContain("2 of 5 sent today");
    expect(text).toContain("Sent today 2 messages accepted since 00:00 UTC");
    // The inactive sender sent nothing.
    expect(text).toContain("Sent today 0 messages accepted since 00:00 UTC");

    // Redis lost the counter: the day's accepted messages in Postgres.
    const key = env.deps.keys.dailyQuota(tenantId, CHANNEL, utcDay(env.clock.now()).key);
    expect(await env.deps.redis.get(key)).toBe("2");
    await env.deps.redis.del(key);
    expect(plain((await client.get("/panel/senders")).text)).toContain("2 of 5 sent today");

    // The counter is what the admission enforces; the page shows it when there is one.
    await env.deps.redis.set(key, "5");
    const full = await client.get("/panel/senders");
    expect(plain(full.text)).toContain("5 of 5 sent today");
    expect(full.text).toContain('<span class="badge bad">Used up</span>');
    await env.deps.redis.set(key, "2");
  });

  test("another tenant sees none of it; a tenant without senders gets an explanation", async () => {
    const other = await signedInClient(env.app, env.deps, { tenantName: "Other Co" });
    const page = await other.client.get("/panel/senders");
    expect(page.status).toBe(200);
    expect(page.text).not.toContain(shop.id);
    expect(page.text).not.toContain("+15550100021");
    expect(page.text).not.toContain("order_shipped");
    const text = plain(page.text);
    expect(text).toContain("No senders connected yet");
    expect(text).toContain("bun run cli sender create");
    // The default quota (DAILY_SEND_QUOTA), and this tenant's own (zero) use.
    expect(text).toContain(`0 of ${env.config.dailySendQuota.toLocaleString("en-US")} sent today`);
  });

  test("the message history's retention: 400 days unless set, as the operator sets it (issue 25)", async () => {
    const other = await signedInClient(env.app, env.deps, { tenantName: "Keeper Co" });
    expect(plain((await other.client.get("/panel/senders")).text)).toContain("Messages are kept 400 days");
    for (const [days, shown] of [
      [30, "30 days"],
      [1, "1 day"],
      [5 / 1440, "5 minutes"],
    ] as const) {
      await setMessageRetention(env.deps.db, other.tenant.id, days);
      expect(plain((await other.client.get("/panel/senders")).text)).toContain(`Messages are kept ${shown}`);
    }
  });

  test("a rejected template shows the provider's reason (issue 24)", async () => {
    const page = await client.get("/panel/senders");
    expect(page.text).toContain(
      '<span class="rejection-reason small">Reason: invalid format (for example a malformed variable or a missing example) <code>INVALID_FORMAT</code></span>',
    );
    const stored = await env.deps.db
      .selectFrom("templates")
      .select(["name", "rejected_reason"])
      .where("sender_id", "=", shop.id)
      .where("status", "in", ["REJECTED", "APPROVED"])
      .execute();
    expect(stored.find((t) => t.name === "old_promo")?.rejected_reason).toBe("INVALID_FORMAT");
    expect(stored.filter((t) => t.name !== "old_promo").every((t) => t.rejected_reason === null)).toBe(true);
  });

  test("Sync now: the provider's templates at once, for an active sender of this tenant only", async () => {
    const page = await client.get("/panel/senders");
    const action = `/panel/senders/${shop.id}/sync-templates`;
    expect(page.text).toContain(`<form method="post" action="${action}" class="sync-form">`);
    // Only active senders sync (the maintenance loop skips inactive ones too).
    expect(page.text).not.toContain(`/panel/senders/${retired.id}/sync-templates`);

    await env.deps.db
      .deleteFrom("templates")
      .where("sender_id", "=", shop.id)
      .where("name", "=", "welcome")
      .execute();
    expect((await client.get("/panel/senders")).text).not.toContain("<code>welcome</code>");
    env.clock.advance(120);
    const synced = await client.post(action);
    expect(synced.status).toBe(303);
    expect(synced.headers.get("location")).toBe(`/panel/senders?synced=${shop.id}#sender-${shop.id}`);
    const after = await client.get(`/panel/senders?synced=${shop.id}`);
    expect(after.text).toContain("<code>welcome</code>");
    expect(plain(after.text)).toContain("Templates synced just now: this list is what the provider reports.");

    const inactive = await client.post(`/panel/senders/${retired.id}/sync-templates`);
    expect(inactive.status).toBe(409);
    expect(plain(inactive.text)).toContain("Templates were not synced. This sender is deactivated");

    // Another tenant's sender is not there; a post without the page's token changes nothing.
    const other = await signedInClient(env.app, env.deps, { tenantName: "Sync Other" });
    await other.client.get("/panel/senders");
    expect((await other.client.post(action)).status).toBe(404);
    expect((await client.request("POST", action, { form: {} })).status).toBe(403);
  });

  test("signed out: sent to sign in", async () => {
    const anonymous = await call(env.app, "GET", "/panel/senders");
    expect(anonymous.status).toBe(303);
  });
});
