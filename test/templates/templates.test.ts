import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import type { TemplateComponent } from "../../src/channel/provider.ts";
import { createWhatsAppProvider } from "../../src/channel/whatsapp.ts";
import { createLogger } from "../../src/logger.ts";
import { insertSender, type SenderRow, setSenderActive } from "../../src/senders/repository.ts";
import {
  syncAllActiveSenders,
  syncSenderTemplates,
  TEMPLATE_SYNC_LOCK_KEY,
} from "../../src/senders/template-sync.ts";
import {
  countApprovedTemplates,
  findApprovedTemplates,
  listApprovedTemplates,
  listSenderTemplates,
} from "../../src/templates/repository.ts";
import {
  bodyText,
  headerFormat,
  headerText,
  placeholderNames,
  templateVariables,
} from "../../src/templates/variables.ts";
import { createTenantWithApp, createTestEnv, type TestEnv } from "../support/index.ts";

describe("template variables", () => {
  test("positional placeholders, header, and a dynamic URL button by its index among all buttons", () => {
    const components: TemplateComponent[] = [
      { type: "HEADER", format: "TEXT", text: "Reminder for {{1}}" },
      { type: "BODY", text: "See you on {{1}} at {{2}}, {{1}}." },
      { type: "FOOTER", text: "Reply STOP {{9}}" },
      {
        type: "BUTTONS",
        buttons: [
          { type: "QUICK_REPLY", text: "OK" },
          { type: "URL", text: "Static", url: "https://example.com/help" },
          { type: "URL", text: "Manage", url: "https://example.com/a/{{1}}" },
          { type: "PHONE_NUMBER", text: "Call", phone_number: "+15550100001" },
        ],
      },
    ];
    expect(templateVariables(components)).toEqual({ body: ["1", "2"], header: ["1"], buttons: ["2"] });
    expect(bodyText(components)).toBe("See you on {{1}} at {{2}}, {{1}}.");
    expect(headerFormat(components)).toBe("TEXT");
    expect(headerText(components)).toBe("Reminder for {{1}}");
  });

  test("named placeholders keep their names, in order of first appearance", () => {
    const components: TemplateComponent[] = [
      { type: "HEADER", format: "TEXT", text: "Order {{order_id}}" },
      {
        type: "BODY",
        text: "Hi {{first_name}}, order {{order_id}} ships {{ship_date}}. Thanks {{first_name}}!",
      },
    ];
    expect(templateVariables(components)).toEqual({
      body: ["first_name", "order_id", "ship_date"],
      header: ["order_id"],
      buttons: [],
    });
    expect(placeholderNames("{{2}} before {{1}}")).toEqual(["2", "1"]);
  });

  test("no placeholders, media header, no body", () => {
    const plain: TemplateComponent[] = [{ type: "BODY", text: "Welcome to our service!" }];
    expect(templateVariables(plain)).toEqual({ body: [], header: [], buttons: [] });
    expect(headerFormat(plain)).toBeNull();
    expect(headerText(plain)).toBeNull();

    const media: TemplateComponent[] = [{ type: "HEADER", format: "DOCUMENT" }];
    expect(templateVariables(media)).toEqual({ body: [], header: [], buttons: [] });
    expect(headerFormat(media)).toBe("DOCUMENT");
    expect(bodyText(media)).toBe("");
  });
});

describe("template sync against the simulator", () => {
  let env: TestEnv;
  let tenantId: string;
  let sender: SenderRow;

  beforeAll(async () => {
    env = await createTestEnv({ simulator: true });
    tenantId = (await createTenantWithApp(env.deps)).tenant.id;
    sender = await insertSender(env.deps.db, env.config.providerTokenKey, {
      tenantId,
      phoneNumber: "+15550100001",
      providerPhoneNumberId: "100000000000101",
      wabaId: "200000000000101",
      accessToken: "sim-access-token",
    });
  });
  afterAll(() => env.close());

  test("stores every template with its status, variables, preview and header format", async () => {
    const rows = await syncSenderTemplates(env.deps, sender);
    expect(rows.map((r) => [r.name, r.language, r.status])).toEqual([
      ["appointment_reminder", "en", "APPROVED"],
      ["delivery_video", "en", "APPROVED"],
      ["invoice_ready", "en", "APPROVED"],
      ["login_code", "en", "APPROVED"],
      ["old_promo", "en", "REJECTED"],
      ["order_shipped", "de", "APPROVED"],
      ["order_shipped", "en", "APPROVED"],
      ["summer_sale", "en", "PENDING"],
      ["welcome", "en", "APPROVED"],
    ]);
    const byName = new Map(rows.map((r) => [`${r.name}/${r.language}`, r]));
    expect(byName.get("appointment_reminder/en")).toMatchObject({
      tenant_id: tenantId,
      sender_id: sender.id,
      provider_template_id: "1000000000000005",
      category: "UTILITY",
      variables: { body: ["1", "2"], header: ["1"], buttons: ["0"] },
      preview: "See you on {{1}} at {{2}}.",
      header_format: "TEXT",
    });
    expect(byName.get("invoice_ready/en")).toMatchObject({
      variables: { body: ["1"], header: [], buttons: [] },
      header_format: "DOCUMENT",
    });
    expect(byName.get("delivery_video/en")?.header_format).toBe("VIDEO");
    expect(byName.get("welcome/en")).toMatchObject({
      variables: { body: [], header: [], buttons: [] },
      header_format: null,
    });
    for (const row of rows) expect(row.id).toMatch(/^tpl_[0-9A-Za-z]{22}$/);
    const synced = await env.deps.db
      .selectFrom("senders")
      .select("templates_synced_at")
      .where("id", "=", sender.id)
      .executeTakeFirstOrThrow();
    expect(synced.templates_synced_at).toEqual(env.clock.now());
  });

  test("re-sync keeps ids; a template the provider stopped reporting becomes DELETED, and returns", async () => {
    const before = await listSenderTemplates(env.deps.db, tenantId, sender.id);
    const real = env.deps.provider;
    const withoutWelcome = {
      ...real,
      listTemplates: async (creds: Parameters<typeof real.listTemplates>[0]) =>
        (await real.listTemplates(creds)).filter((t) => t.name !== "welcome"),
    };
    const afterDrop = await syncSenderTemplates({ ...env.deps, provider: withoutWelcome }, sender);
    expect(afterDrop.map((r) => r.id)).toEqual(before.map((r) => r.id));
    expect(afterDrop.find((r) => r.name === "welcome")?.status).toBe("DELETED");
    expect((await listApprovedTemplates(env.deps.db, tenantId, sender.id)).map((r) => r.name)).not.toContain(
      "welcome",
    );

    const again = await syncSenderTemplates(env.deps, sender);
    expect(again.map((r) => r.id)).toEqual(before.map((r) => r.id));
    expect(again.find((r) => r.name === "welcome")?.status).toBe("APPROVED");
  });

  test("repository: approved only, by name and language, scoped by tenant", async () => {
    const approved = await listApprovedTemplates(env.deps.db, tenantId, sender.id);
    expect(approved.map((r) => `${r.name}/${r.language}`)).toEqual([
      "appointment_reminder/en",
      "delivery_video/en",
      "invoice_ready/en",
      "login_code/en",
      "order_shipped/de",
      "order_shipped/en",
      "welcome/en",
    ]);
    expect(await countApprovedTemplates(env.deps.db, tenantId, sender.id)).toBe(7);
    const shipped = await findApprovedTemplates(env.deps.db, tenantId, sender.id, "order_shipped");
    expect(shipped.map((r) => r.language)).toEqual(["de", "en"]);
    expect(await findApprovedTemplates(env.deps.db, tenantId, sender.id, "summer_sale")).toEqual([]);
    expect(await findApprovedTemplates(env.deps.db, tenantId, sender.id, "ORDER_SHIPPED")).toEqual([]);

    const other = await createTenantWithApp(env.deps, { name: "Other" });
    expect(await listApprovedTemplates(env.deps.db, other.tenant.id, sender.id)).toEqual([]);
    expect(await findApprovedTemplates(env.deps.db, other.tenant.id, sender.id, "order_shipped")).toEqual([]);
  });

  test("an unreachable provider changes nothing and throws", async () => {
    const before = await listSenderTemplates(env.deps.db, tenantId, sender.id);
    const down = createWhatsAppProvider({ baseUrl: "http://127.0.0.1:9" });
    await expect(syncSenderTemplates({ ...env.deps, provider: down }, sender)).rejects.toMatchObject({
      code: "provider_unavailable",
    });
    expect(await listSenderTemplates(env.deps.db, tenantId, sender.id)).toEqual(before);
  });

  test("sync of all active senders: one failure does not stop the others; one process at a time", async () => {
    const broken = await insertSender(env.deps.db, env.config.providerTokenKey, {
      tenantId,
      phoneNumber: "+15550100002",
      providerPhoneNumberId: "100000000000102",
      wabaId: "broken-waba",
      accessToken: "sim-access-token",
    });
    const inactive = await insertSender(env.deps.db, env.config.providerTokenKey, {
      tenantId,
      phoneNumber: "+15550100003",
      providerPhoneNumberId: "100000000000103",
      wabaId: "200000000000103",
      accessToken: "sim-access-token",
    });
    await setSenderActive(env.deps.db, inactive.id, false);
    const real = env.deps.provider;
    const failsForOne = {
      ...real,
      listTemplates: async (creds: Parameters<typeof real.listTemplates>[0]) => {
        if (creds.wabaId === "broken-waba") throw new Error("boom");
        return real.listTemplates(creds);
      },
    };
    const deps = { ...env.deps, provider: failsForOne, logger: createLogger("silent") };
    expect(await syncAllActiveSenders(deps)).toEqual({ ran: true, synced: 1, failed: 1 });
    expect(await countApprovedTemplates(env.deps.db, tenantId, broken.id)).toBe(0);
    expect(await countApprovedTemplates(env.deps.db, tenantId, inactive.id)).toBe(0);

    // Another maintenance process holding the lock: this one skips its turn.
    await env.deps.db.connection().execute(async (conn) => {
      await sql`SELECT pg_advisory_lock(${TEMPLATE_SYNC_LOCK_KEY})`.execute(conn);
      try {
        expect(await syncAllActiveSenders(deps)).toEqual({ ran: false });
      } finally {
        await sql`SELECT pg_advisory_unlock(${TEMPLATE_SYNC_LOCK_KEY})`.execute(conn);
      }
    });
    expect((await syncAllActiveSenders(deps)).ran).toBe(true);
  });
});
