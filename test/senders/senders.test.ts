import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { runCli } from "../../src/cli/index.ts";
import { type SenderRow, senderCredentials, setSenderActive } from "../../src/senders/repository.ts";
import { syncSenderTemplates } from "../../src/senders/template-sync.ts";
import { addSender, postMessage } from "../support/fixtures.ts";
import {
  call,
  createTenantWithApp,
  createTestEnv,
  deliverOne,
  expectApiError,
  getToken,
  type TestEnv,
} from "../support/index.ts";

let env: TestEnv;
let tenantId: string;
let token: string;
let sender: SenderRow;
let secondSender: SenderRow;
let otherSender: SenderRow;

/** A sender with its templates synced from the simulator, as `sender create` leaves it. */
const connectedSender = (tenant: string, name: string | null, phoneNumber: string) =>
  addSender(env, tenant, { name, phoneNumber, templates: true });

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  const mine = await createTenantWithApp(env.deps);
  tenantId = mine.tenant.id;
  token = await getToken(env.app, mine.clientId, mine.clientSecret);
  sender = await connectedSender(tenantId, "Shop", "+15550100011");
  secondSender = await connectedSender(tenantId, null, "+15550100012");
  const retired = await connectedSender(tenantId, "Old number", "+15550100013");
  await setSenderActive(env.deps.db, retired.id, false);
  const other = await createTenantWithApp(env.deps, { name: "Other shop" });
  otherSender = await connectedSender(other.tenant.id, "Other", "+15550100014");
});
afterAll(() => env.close());

describe("GET /senders", () => {
  test("lists the caller's active senders exactly as SPEC §2 describes them", async () => {
    const result = await call(env.app, "GET", "/v2/senders", { token });
    expect(result.status).toBe(200);
    expect(result.body).toEqual({
      object: "list",
      url: "/v2/senders",
      has_more: false,
      data: [
        {
          object: "sender",
          id: sender.id,
          channel: "whatsapp",
          name: "Shop",
          phone_number: "+15550100011",
          quota: expect.any(Object),
          throughput: expect.any(Object),
        },
        {
          object: "sender",
          id: secondSender.id,
          channel: "whatsapp",
          name: null,
          phone_number: "+15550100012",
          quota: expect.any(Object),
          throughput: expect.any(Object),
        },
      ],
    });
    expect(result.headers.get("request-id")).toMatch(/^req_/);
  });

  test("each sender shows its channel's daily quota: the limit, today's use, the next 00:00 UTC", async () => {
    const now = env.clock.now();
    const midnight = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
    const quotaNow = async () => (await call(env.app, "GET", "/v2/senders", { token })).body.data[0].quota;
    const before = await quotaNow();
    expect(before).toEqual({
      limit: env.config.dailySendQuota,
      used: expect.any(Number),
      resets_at: midnight.toISOString(),
    });
    const sent = await postMessage(env.app, token, {
      sender: sender.id,
      to: "+15550100999",
      template: { name: "welcome" },
    });
    expect(sent.status).toBe(201);
    expect(await quotaNow()).toEqual({ ...before, used: before.used + 1 });
  });

  test("throughput: the sender's pace, its backlog of unsent messages, and when it drains", async () => {
    const throughputNow = async () =>
      (await call(env.app, "GET", "/v2/senders", { token })).body.data.find(
        (s: { id: string }) => s.id === sender.id,
      ).throughput;
    const before = await throughputNow();
    expect(before).toEqual({
      mps: 80,
      backlog: expect.any(Number),
      estimated_drain_seconds: expect.any(Number),
    });
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const sent = await postMessage(env.app, token, {
        sender: sender.id,
        to: `+1555010099${i}`,
        template: { name: "welcome" },
      });
      expect(sent.status).toBe(201);
      ids.push(sent.body.id);
    }
    const queued = await throughputNow();
    expect(queued.backlog).toBe(before.backlog + 3);
    expect(queued.estimated_drain_seconds).toBe(Math.ceil(queued.backlog / 80));
    // Handed to the provider: out of the backlog.
    for (const id of ids) expect(await deliverOne(env.deps, id)).toBe("sent");
    expect((await throughputNow()).backlog).toBe(before.backlog);
  });

  test("needs a token with messaging:read", async () => {
    expect((await call(env.app, "GET", "/v2/senders")).status).toBe(401);
    const sendOnly = await createTenantWithApp(env.deps, { scopes: ["messaging:send"] });
    const sendToken = await getToken(env.app, sendOnly.clientId, sendOnly.clientSecret);
    const forbidden = await call(env.app, "GET", "/v2/senders", { token: sendToken });
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.error.code).toBe("insufficient_scope");
  });

  test("a tenant without senders gets an empty list", async () => {
    const empty = await createTenantWithApp(env.deps, { name: "Empty" });
    const emptyToken = await getToken(env.app, empty.clientId, empty.clientSecret);
    const result = await call(env.app, "GET", "/v2/senders", { token: emptyToken });
    expect(result.body).toEqual({ object: "list", url: "/v2/senders", has_more: false, data: [] });
  });
});

/** An approved template with only body variables and no buttons. */
const bodyOnly = (name: string, language: string, body: string[], preview: string, format: string) => ({
  name,
  language,
  category: "utility",
  variables: { body, header: [], buttons: [] },
  preview,
  header: { format },
  buttons: [],
});

const APPOINTMENT_REMINDER = {
  name: "appointment_reminder",
  language: "en",
  category: "utility",
  variables: { body: ["1", "2"], header: ["1"], buttons: ["0"] },
  preview: "See you on {{1}} at {{2}}.",
  header: { format: "text" },
  buttons: [{ type: "url", text: "Manage appointment", url: "https://example.com/a/{{1}}" }],
};

const APPROVED_TEMPLATES = [
  APPOINTMENT_REMINDER,
  bodyOnly("delivery_video", "en", ["1"], "Watch how we packed order {{1}}.", "video"),
  bodyOnly("invoice_ready", "en", ["1"], "Your invoice {{1}} is ready.", "document"),
  {
    ...bodyOnly("login_code", "en", ["1"], "{{1}} is your verification code.", "none"),
    category: "authentication",
  },
  bodyOnly("order_shipped", "de", ["1", "2"], "Hallo {{1}}, deine Bestellung {{2}} wurde versandt.", "none"),
  bodyOnly("order_shipped", "en", ["1", "2"], "Hi {{1}}, your order {{2}} has shipped.", "none"),
  { ...bodyOnly("welcome", "en", [], "Welcome to our service!", "none"), category: "marketing" },
];

describe("GET /senders/{sender_id}/templates", () => {
  const path = (id: string) => `/v2/senders/${id}/templates`;

  test("lists exactly the approved templates, with their variables and previews", async () => {
    const result = await call(env.app, "GET", path(sender.id), { token });
    expect(result.status).toBe(200);
    expect(result.body).toEqual({
      object: "list",
      url: path(sender.id),
      has_more: false,
      data: APPROVED_TEMPLATES.map((template) => ({
        object: "template",
        id: expect.stringMatching(/^tpl_[0-9A-Za-z]{22}$/),
        ...template,
      })),
    });
    const names = result.body.data.map((t: { name: string }) => t.name);
    expect(names).not.toContain("summer_sale");
    expect(names).not.toContain("old_promo");
    const stored = await env.deps.db
      .selectFrom("templates")
      .select(["name", "header_format"])
      .where("sender_id", "=", sender.id)
      .where("name", "=", "invoice_ready")
      .executeTakeFirstOrThrow();
    expect(stored.header_format).toBe("DOCUMENT");
  });

  test("a re-sync keeps the template ids", async () => {
    const before = await call(env.app, "GET", path(sender.id), { token });
    await syncSenderTemplates(env.deps, sender);
    const after = await call(env.app, "GET", path(sender.id), { token });
    expect(after.body).toEqual(before.body);
  });

  test("each sender has its own template ids", async () => {
    const mine = await call(env.app, "GET", path(sender.id), { token });
    const second = await call(env.app, "GET", path(secondSender.id), { token });
    expect(second.body.data).toHaveLength(7);
    const ids = new Set(mine.body.data.map((t: { id: string }) => t.id));
    for (const template of second.body.data) expect(ids.has(template.id)).toBe(false);
  });

  test("another tenant's sender, an unknown one and a flipped-case id are 404 resource_missing", async () => {
    expectApiError(
      await call(env.app, "GET", path(otherSender.id), { token }),
      404,
      "resource_missing",
      "sender_id",
    );
    expectApiError(
      await call(env.app, "GET", path("snd_0000000000000000000000"), { token }),
      404,
      "resource_missing",
      "sender_id",
    );
    const flipped = sender.id.replace(/[A-Za-z](?=[^_]*$)/, (c) =>
      c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase(),
    );
    expect(flipped).not.toBe(sender.id);
    expect(flipped.toLowerCase()).toBe(sender.id.toLowerCase());
    expectApiError(
      await call(env.app, "GET", path(flipped), { token }),
      404,
      "resource_missing",
      "sender_id",
    );
  });

  test("a malformed sender id is 400 parameter_invalid", async () => {
    for (const bad of ["ctc_0000000000000000000000", "snd_", "snd_abc-def", "SND_abc", "abc"]) {
      expectApiError(await call(env.app, "GET", path(bad), { token }), 400, "parameter_invalid", "sender_id");
    }
  });

  test("needs a token before the sender id is looked at", async () => {
    expect((await call(env.app, "GET", path("not-an-id"))).status).toBe(401);
  });
});

describe("operator CLI: senders and templates", () => {
  const cliEnv = () => ({
    ...process.env,
    NODE_ENV: "development",
    DATABASE_URL: env.config.databaseUrl,
    WHATSAPP_GRAPH_URL: env.simulatorUrl,
    LOG_LEVEL: "silent",
  });
  async function cli(args: string[], overrides: Record<string, string> = {}) {
    const { code, out } = await runCli(args, { ...cliEnv(), ...overrides });
    return { code, body: JSON.parse(out) };
  }
  /** `sender create` connecting one number of a tenant, by its provider ids. */
  const createArgs = (tenant: string, phone: string, phoneNumberId: string, wabaId: string) => [
    "sender",
    "create",
    "--tenant",
    tenant,
    "--phone",
    phone,
    "--phone-number-id",
    phoneNumberId,
    "--waba-id",
    wabaId,
  ];
  /** The sender `sender create` prints: active, at the default pace, and the given fields. */
  const printedSender = (fields: Record<string, unknown>) => ({
    object: "sender",
    id: expect.stringMatching(/^snd_[0-9A-Za-z]{22}$/),
    active: true,
    mps: 80,
    ...fields,
  });

  test("sender create connects a number and syncs its templates; deactivate retires it", async () => {
    const created = await cli([
      ...createArgs(tenantId, "1 555 010 0021", "100000000000301", "200000000000301"),
      "--name",
      "Support",
    ]);
    expect(created.code).toBe(0);
    expect(created.body).toEqual(
      printedSender({
        tenant: tenantId,
        phone_number: "+15550100021",
        name: "Support",
        provider_phone_number_id: "100000000000301",
        templates_synced: 7,
      }),
    );
    const stored = await env.deps.db
      .selectFrom("senders")
      .selectAll()
      .where("id", "=", created.body.id)
      .executeTakeFirstOrThrow();
    // Stored sealed (docs/operations.md, "Secrets at rest"), opened for the provider.
    expect(stored.access_token).not.toContain("sim-access-token");
    expect(senderCredentials(env.config.providerTokenKey, stored).accessToken).toBe("sim-access-token");
    const listed = await call(env.app, "GET", `/v2/senders/${created.body.id}/templates`, { token });
    expect(listed.body.data).toHaveLength(7);

    const deactivated = await cli(["sender", "deactivate", "--sender", created.body.id]);
    expect(deactivated).toEqual({ code: 0, body: { ...created.body, active: false } });
    const senders = await call(env.app, "GET", "/v2/senders", { token });
    expect(senders.body.data.map((s: { id: string }) => s.id)).not.toContain(created.body.id);
  });

  test("sender create --mps sets the sender's pace; it must be a positive integer", async () => {
    const base = createArgs(tenantId, "+15550100029", "100000000000309", "200000000000309");
    const refused = await cli([...base, "--mps", "0"]);
    expect(refused.code).not.toBe(0);
    expect(refused.body.error.code).toBe("invalid_flag");
    const created = await cli([...base, "--mps", "20"]);
    expect(created.code).toBe(0);
    expect(created.body.mps).toBe(20);
    const stored = await env.deps.db
      .selectFrom("senders")
      .select("mps")
      .where("id", "=", created.body.id)
      .executeTakeFirstOrThrow();
    expect(stored.mps).toBe(20);
  });

  test("sender create with the provider unreachable still creates the sender, with a warning", async () => {
    const created = await cli(
      [
        ...createArgs(tenantId, "+15550100022", "100000000000302", "200000000000302"),
        "--access-token",
        "real-token",
      ],
      { WHATSAPP_GRAPH_URL: "http://127.0.0.1:9" },
    );
    expect(created.code).toBe(0);
    expect(created.body).toEqual(
      printedSender({
        tenant: tenantId,
        phone_number: "+15550100022",
        name: null,
        provider_phone_number_id: "100000000000302",
        templates_synced: null,
        warning: expect.stringContaining("maintenance worker"),
      }),
    );

    // The operator (or the maintenance loop) syncs once the provider answers.
    const synced = await cli(["templates", "sync", "--sender", created.body.id]);
    expect(synced.code).toBe(0);
    expect(synced.body.object).toBe("list");
    expect(synced.body.data.map((t: { name: string; status: string }) => [t.name, t.status])).toEqual([
      ["appointment_reminder", "approved"],
      ["delivery_video", "approved"],
      ["invoice_ready", "approved"],
      ["login_code", "approved"],
      ["old_promo", "rejected"],
      ["order_shipped", "approved"],
      ["order_shipped", "approved"],
      ["summer_sale", "pending"],
      ["welcome", "approved"],
    ]);
    expect(synced.body.data[0]).toEqual({
      object: "template",
      id: expect.stringMatching(/^tpl_/),
      ...APPOINTMENT_REMINDER,
      status: "approved",
    });
    const unreachable = await cli(["templates", "sync", "--sender", created.body.id], {
      WHATSAPP_GRAPH_URL: "http://127.0.0.1:9",
    });
    expect(unreachable.code).toBe(1);
    expect(unreachable.body.error.code).toBe("provider_unavailable");
  });

  test("sender create refuses a bad phone, an unknown tenant and a number connected already", async () => {
    const badPhone = await cli(createArgs(tenantId, "not a phone", "100000000000303", "200000000000303"));
    expect(badPhone).toEqual({
      code: 1,
      body: { error: { code: "invalid_flag", message: expect.any(String) } },
    });
    const noTenant = await cli(
      createArgs("ten_missing", "+15550100023", "100000000000303", "200000000000303"),
    );
    expect(noTenant.body.error.code).toBe("tenant_not_found");
    const duplicate = await cli(
      createArgs(tenantId, "+15550100023", sender.provider_phone_number_id, "200000000000303"),
    );
    expect(duplicate.code).toBe(1);
    expect(duplicate.body.error).toEqual({
      code: "duplicate_sender",
      message: expect.stringContaining(sender.provider_phone_number_id),
    });
    const missing = await cli(["sender", "deactivate", "--sender", "snd_missing"]);
    expect(missing.body.error.code).toBe("sender_not_found");
    const unsynced = await cli(["templates", "sync", "--sender", "snd_missing"]);
    expect(unsynced.body.error.code).toBe("sender_not_found");
  });

  test("seed connects one demo sender with its templates", async () => {
    const seeded = await cli(["seed"]);
    expect(seeded.code).toBe(0);
    expect(seeded.body.sender).toEqual(
      printedSender({
        tenant: seeded.body.tenant.id,
        phone_number: "+15550100001",
        name: "Demo Shop",
        provider_phone_number_id: "100000000000001",
        templates_synced: 7,
      }),
    );
  });
});
