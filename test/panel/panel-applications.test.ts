import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { findApplicationByClientId } from "../../src/applications/repository.ts";
import {
  createApplication,
  revokeApplication,
  rotateApplicationSecret,
} from "../../src/applications/service.ts";
import { validateNewApplication } from "../../src/panel/applications.ts";
import { call, createTestEnv, getToken, requestToken, type TestEnv } from "../support/index.ts";
import {
  expectShows,
  type PanelClient,
  type PanelResponse,
  postRefused,
  signedInClient,
} from "../support/panel.ts";

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv({ limits: { anonymous: 10_000, token: 10_000 } });
});
afterAll(() => env.close());

function secretsOf(page: PanelResponse) {
  const clientId = /<code id="client-id"[^>]*>([^<]+)<\/code>/.exec(page.text)?.[1];
  const clientSecret = /<code id="client-secret"[^>]*>([^<]+)<\/code>/.exec(page.text)?.[1];
  if (!clientId || !clientSecret) throw new Error(`no credentials on the page (${page.status})`);
  return { clientId, clientSecret };
}

function formIdOf(page: PanelResponse): string {
  const id = /name="form_id" value="([^"]+)"/.exec(page.text)?.[1];
  if (!id) throw new Error("no form_id on the page");
  return id;
}

async function createViaPanel(client: PanelClient, name: string, scopes: string[] = ["messaging:send"]) {
  const form = await client.get("/panel/applications");
  const created = await client.post("/panel/applications", { name, scopes, form_id: formIdOf(form) });
  expect(created.status).toBe(201);
  return { page: created, ...secretsOf(created) };
}

const tokenRequest = (clientId: string, clientSecret: string, scope?: string) =>
  requestToken(env.app, clientId, clientSecret, scope);

/** The names of a tenant's applications, as stored. */
const applicationNames = async (tenantId: string) =>
  (
    await env.deps.db.selectFrom("applications").select("name").where("tenant_id", "=", tenantId).execute()
  ).map((row) => row.name);

/** The token endpoint refuses this secret: 401 invalid_client. */
async function expectSecretRefused(clientId: string, clientSecret: string) {
  const refused = await tokenRequest(clientId, clientSecret);
  expect(refused.status).toBe(401);
  expect(refused.body.error).toBe("invalid_client");
}

describe("panel: applications list and create", () => {
  test("an empty tenant sees an explanation and the form, with labels and hints", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const page = await client.get("/panel/applications");
    expect(page.status).toBe(200);
    expectShows(page, [
      "No applications yet",
      '<label for="app-name">Name</label>',
      "<legend>Scopes</legend>",
      'value="messaging:send"',
      'value="messaging:read"',
      // Offered like the others, and chosen by default as the CLI's default has every scope.
      'value="webhooks:manage" checked',
      'aria-describedby="app-name-hint"',
      'aria-current="page">Applications</a>',
    ]);
  });

  test("create shows the secret once; it works at the token endpoint; the list never shows it", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const { page, clientId, clientSecret } = await createViaPanel(client, "  Shop backend  ", [
      "messaging:send",
      "messaging:read",
    ]);
    expect(clientId).toMatch(/^cid_[0-9A-Za-z]{22}$/);
    expect(clientSecret).toMatch(/^csec_/);
    expect(page.headers.get("cache-control")).toBe("no-store");
    expect(page.headers.get("location")).toBeNull();
    expectShows(page, [
      "will\n  not be shown again",
      'class="secret"',
      'data-copy="#client-secret"',
      'data-copy="#client-id"',
      "“Shop backend” is ready",
      'href="/panel/applications"',
    ]);

    const stored = await findApplicationByClientId(env.deps.db, clientId);
    expect(stored?.name).toBe("Shop backend");
    expect(stored?.scopes).toEqual(["messaging:send", "messaging:read"]);
    expect(stored?.lastTokenAt).toBeNull();

    const before = await client.get("/panel/applications");
    expect(before.text).toContain(clientId);
    expect(before.text).toContain("Shop backend");
    expect(before.text).not.toContain(clientSecret);
    expect(before.text).toContain(">never<");
    expect(before.text).toContain('<span class="badge ok">Active</span>');

    const token = await tokenRequest(clientId, clientSecret);
    expect(token.status).toBe(200);
    expect(token.body.scope).toBe("messaging:send messaging:read");

    const after = await client.get("/panel/applications");
    expect(after.text).not.toContain(clientSecret);
    expect(after.text).not.toContain(">never<");
  });

  test("the scopes chosen are the application's scopes", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const { clientId, clientSecret } = await createViaPanel(client, "Reader", ["messaging:read"]);
    expect((await findApplicationByClientId(env.deps.db, clientId))?.scopes).toEqual(["messaging:read"]);
    const token = await tokenRequest(clientId, clientSecret);
    expect(token.body.scope).toBe("messaging:read");
    const wider = await tokenRequest(clientId, clientSecret, "messaging:send");
    expect(wider.status).toBe(400);
    expect(wider.body.error).toBe("invalid_scope");
    const list = await client.get("/panel/applications");
    expect(list.text).toContain('<code class="scope">messaging:read</code>');
  });

  test("validation errors re-render the form with 400 and create nothing", async () => {
    const { client, tenant } = await signedInClient(env.app, env.deps);
    const count = async () => (await applicationNames(tenant.id)).length;

    const noName = await postRefused(
      client,
      "/panel/applications",
      { name: "   ", scopes: "messaging:send" },
      "Enter a name for the application.",
    );
    expect(noName.text).toContain('role="alert"');
    expect(noName.text).toContain('aria-describedby="app-name-hint app-name-error" aria-invalid="true"');
    expect(noName.text).toContain('id="app-name-error"');
    // The user's choice is kept.
    expect(noName.text).toContain('value="messaging:send" checked');
    expect(noName.text).not.toContain('value="messaging:read" checked');

    const noScope = await postRefused(
      client,
      "/panel/applications",
      { name: "Kept name" },
      "Choose at least one scope.",
    );
    expect(noScope.text).toContain('value="Kept name"');
    expect(noScope.text).toContain('id="app-scopes-error"');
    expect(noScope.text).toMatch(
      /value="messaging:send" aria-describedby="scope-hint-0 app-scopes-error" aria-invalid="true"/,
    );

    await postRefused(
      client,
      "/panel/applications",
      { name: "x".repeat(101), scopes: "messaging:read" },
      "at most 100 characters",
    );

    const unknownScope = await client.post("/panel/applications", { name: "Sneaky", scopes: "admin" });
    expect(unknownScope.status).toBe(400);

    expect(await count()).toBe(0);
    // Exactly 100 characters is fine.
    await createViaPanel(client, "y".repeat(100));
    expect(await count()).toBe(1);
  });

  test("validation rules", () => {
    expect(validateNewApplication({ name: " a ", scopes: ["messaging:read", "messaging:send"] })).toEqual({
      name: "a",
      scopes: ["messaging:send", "messaging:read"],
      errors: undefined,
    });
    expect(validateNewApplication({ name: "two\nlines", scopes: "messaging:read" }).errors?.name).toContain(
      "line breaks",
    );
    // 100 characters counted as characters, not UTF-16 units.
    expect(
      validateNewApplication({ name: "🙂".repeat(100), scopes: "messaging:read" }).errors,
    ).toBeUndefined();
    const both = validateNewApplication({});
    expect(both.errors?.name).toBeDefined();
    expect(both.errors?.scopes).toBeDefined();
  });

  test("posting the same form twice (reload, double click) creates one application", async () => {
    const { client, tenant } = await signedInClient(env.app, env.deps);
    const form = await client.get("/panel/applications");
    const once = { name: "Once", scopes: "messaging:send", form_id: formIdOf(form) };
    const first = await client.post("/panel/applications", once);
    expect(first.status).toBe(201);
    const { clientId, clientSecret } = secretsOf(first);
    const again = await client.post("/panel/applications", once);
    expect(again.status).toBe(409);
    expect(again.text).toContain("This form was already sent");
    expect(again.text).toContain(clientId);
    expect(again.text).not.toContain(clientSecret);
    expect(again.text).toContain(`/panel/applications/${clientId}/rotate-secret`);
    expect(await applicationNames(tenant.id)).toEqual(["Once"]);
  });

  test("a hostile name is escaped everywhere it is shown", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const hostile = `<script>alert("x")</script><img src=x onerror=alert(1)>`;
    const { page, clientId } = await createViaPanel(client, hostile);
    const escaped = "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;";
    for (const text of [
      page.text,
      (await client.get("/panel/applications")).text,
      (await client.get(`/panel/applications/${clientId}/revoke`)).text,
    ]) {
      expect(text).not.toContain("<script>alert");
      expect(text).not.toContain("<img src=x");
      expect(text).toContain(escaped);
    }
  });
});

describe("panel: rotate and revoke", () => {
  test("rotate: a new secret shown once; the old one is refused at once, the new one works", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const { clientId, clientSecret: oldSecret } = await createViaPanel(client, "Rotating", [
      "messaging:read",
    ]);
    const oldToken = await getToken(env.app, clientId, oldSecret);

    const list = await client.get("/panel/applications");
    expect(list.text).toContain(`href="/panel/applications/${clientId}/rotate-secret"`);
    // The rotation page asks what becomes of the old secret; looking is not rotating.
    const confirm = await client.get(`/panel/applications/${clientId}/rotate-secret`);
    expect(confirm.status).toBe(200);
    expect(confirm.text).toContain("Rotate the secret of “Rotating”");
    expect(confirm.text).toMatch(/<input type="radio" name="overlap" value="0" checked/);
    expect((await tokenRequest(clientId, oldSecret)).status).toBe(200);

    // No overlap chosen (as a form without the field): none, the old secret stops at once.
    const rotated = await client.post(`/panel/applications/${clientId}/rotate-secret`);
    expect(rotated.status).toBe(200);
    expect(rotated.headers.get("cache-control")).toBe("no-store");
    const { clientId: sameId, clientSecret: newSecret } = secretsOf(rotated);
    expect(sameId).toBe(clientId);
    expect(newSecret).not.toBe(oldSecret);
    expect(rotated.text).toContain("The old secret stopped working just now");
    expect(rotated.text).toContain("up to 1 h");

    await expectSecretRefused(clientId, oldSecret);
    expect((await tokenRequest(clientId, newSecret)).status).toBe(200);
    // A token issued before the rotation still works until it expires.
    expect((await call(env.app, "GET", "/v2/senders", { token: oldToken })).status).toBe(200);
    expect((await client.get("/panel/applications")).text).not.toContain(newSecret);
  });

  test("rotate with an overlap: both secrets work until the chosen time, shown on the application", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const { clientId, clientSecret: oldSecret } = await createViaPanel(client, "Overlapping");
    await client.get(`/panel/applications/${clientId}/rotate-secret`);
    const refused = await client.post(`/panel/applications/${clientId}/rotate-secret`, { overlap: "12345" });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain("Choose one of the options listed.");
    expect((await tokenRequest(clientId, oldSecret)).status).toBe(200);

    const rotatedAt = env.clock.now();
    const rotated = await client.post(`/panel/applications/${clientId}/rotate-secret`, { overlap: "3600" });
    expect(rotated.status).toBe(200);
    const { clientSecret: newSecret } = secretsOf(rotated);
    const until = new Date(rotatedAt.getTime() + 3600_000);
    const untilText = `${until.toISOString().replace("T", " ").slice(0, 16)} UTC`;
    expect(rotated.text).toContain(
      `The old secret keeps working until <time datetime="${until.toISOString()}"`,
    );
    expect((await tokenRequest(clientId, oldSecret)).status).toBe(200);
    expect((await tokenRequest(clientId, newSecret)).status).toBe(200);
    const list = await client.get("/panel/applications");
    expect(list.text).toContain("Previous secret valid until");
    expect(list.text).toContain(untilText);

    // Rotating again replaces the overlapping secret: the first one stops now.
    env.clock.advance(60);
    const again = await client.post(`/panel/applications/${clientId}/rotate-secret`, { overlap: "3600" });
    const { clientSecret: newest } = secretsOf(again);
    expect((await tokenRequest(clientId, oldSecret)).status).toBe(401);
    expect((await tokenRequest(clientId, newSecret)).status).toBe(200);
    // Once the overlap ends, only the newest secret works, and the note is gone.
    env.clock.advance(3600);
    expect((await tokenRequest(clientId, newSecret)).status).toBe(401);
    expect((await tokenRequest(clientId, newest)).status).toBe(200);
    expect((await client.get("/panel/applications")).text).not.toContain("Previous secret valid until");
  });

  test("revoke: a confirmation page, then the token endpoint refuses the application", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const { clientId, clientSecret } = await createViaPanel(client, "Leaving");
    expect((await tokenRequest(clientId, clientSecret)).status).toBe(200);

    const list = await client.get("/panel/applications");
    expect(list.text).toContain(`href="/panel/applications/${clientId}/revoke"`);

    const confirm = await client.get(`/panel/applications/${clientId}/revoke`);
    expect(confirm.status).toBe(200);
    expectShows(confirm, [
      "Revoke “Leaving”?",
      "Revoking is permanent.",
      "can no longer get access tokens",
      "keep working until they expire, up to 1 h",
      "its last token expires",
      `<form method="post" action="/panel/applications/${clientId}/revoke"`,
    ]);
    // Looking is not revoking.
    expect((await tokenRequest(clientId, clientSecret)).status).toBe(200);

    const revoked = await client.post(`/panel/applications/${clientId}/revoke`);
    expect(revoked.status).toBe(303);
    expect(revoked.headers.get("location")).toBe(`/panel/applications?revoked=${clientId}`);
    await expectSecretRefused(clientId, clientSecret);

    const after = await client.get(revoked.headers.get("location")!);
    expect(after.text).toContain('<p class="notice" role="status"><strong>“Leaving” is revoked.</strong>');
    expect(after.text).toContain('<span class="badge bad">Revoked</span>');
    expect(after.text).not.toContain(`/panel/applications/${clientId}/rotate-secret`);

    // Idempotent: a second revoke keeps the first time and answers the same.
    const first = (await findApplicationByClientId(env.deps.db, clientId))?.revokedAt;
    env.clock.advance(60);
    const again = await client.post(`/panel/applications/${clientId}/revoke`);
    expect(again.status).toBe(303);
    expect((await findApplicationByClientId(env.deps.db, clientId))?.revokedAt).toEqual(first!);
    const confirmAgain = await client.get(`/panel/applications/${clientId}/revoke`);
    expect(confirmAgain.status).toBe(200);
    expect(confirmAgain.text).toContain("is already revoked");
  });

  test("a revoked application cannot be rotated: 409, nothing changes", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const { clientId } = await createViaPanel(client, "Gone");
    await client.post(`/panel/applications/${clientId}/revoke`);
    const digest = (await findApplicationByClientId(env.deps.db, clientId))?.secretDigest;
    const rotate = await client.post(`/panel/applications/${clientId}/rotate-secret`);
    expect(rotate.status).toBe(409);
    expect(rotate.text).toContain("cannot be rotated");
    expect(rotate.text).not.toContain("csec_");
    expect((await findApplicationByClientId(env.deps.db, clientId))?.secretDigest).toEqual(digest!);
  });

  test("a revoke notice for an id that is not this tenant's shows nothing", async () => {
    const owner = await signedInClient(env.app, env.deps);
    const { clientId } = await createViaPanel(owner.client, "Owner's");
    await owner.client.post(`/panel/applications/${clientId}/revoke`);
    const stranger = await signedInClient(env.app, env.deps);
    const page = await stranger.client.get(`/panel/applications?revoked=${clientId}`);
    expect(page.status).toBe(200);
    expect(page.text).not.toContain("Owner&#39;s");
    expect(page.text).not.toContain('class="notice"');
  });
});

describe("panel: applications are guarded", () => {
  test("POSTs without the CSRF token are refused with 403 and change nothing", async () => {
    const { client, tenant } = await signedInClient(env.app, env.deps);
    const { clientId, clientSecret } = await createViaPanel(client, "Guarded");
    const before = await findApplicationByClientId(env.deps.db, clientId);

    for (const [path, form] of [
      ["/panel/applications", { name: "Forged", scopes: "messaging:send" }],
      [`/panel/applications/${clientId}/rotate-secret`, {}],
      [`/panel/applications/${clientId}/revoke`, {}],
    ] as const) {
      const missing = await client.request("POST", path, { form });
      expect(missing.status).toBe(403);
      expect(missing.text).toContain("This form has expired");
      const wrong = await client.request("POST", path, { form: { ...form, _csrf: "forged-token" } });
      expect(wrong.status).toBe(403);
    }

    const after = await findApplicationByClientId(env.deps.db, clientId);
    expect(after?.revokedAt).toBeNull();
    expect(after?.secretDigest).toEqual(before!.secretDigest);
    expect((await tokenRequest(clientId, clientSecret)).status).toBe(200);
    expect(await applicationNames(tenant.id)).toEqual(["Guarded"]);
  });

  test("another tenant's user: 404 on every application URL, and never sees them listed", async () => {
    const owner = await signedInClient(env.app, env.deps, { tenantName: "Owner Co" });
    const { clientId, clientSecret } = await createViaPanel(owner.client, "Owner secret app");
    const intruder = await signedInClient(env.app, env.deps, { tenantName: "Intruder Co" });
    const mine = await createViaPanel(intruder.client, "Intruder app");

    const list = await intruder.client.get("/panel/applications");
    expect(list.text).toContain(mine.clientId);
    expect(list.text).not.toContain(clientId);
    expect(list.text).not.toContain("Owner secret app");

    const unknown = await intruder.client.get("/panel/applications/cid_doesNotExist0000000000/revoke");
    const attempts = [
      await intruder.client.get(`/panel/applications/${clientId}/revoke`),
      await intruder.client.post(`/panel/applications/${clientId}/revoke`),
      await intruder.client.post(`/panel/applications/${clientId}/rotate-secret`),
      // Case matters: ids are case-sensitive, so a case variant is another (unknown) id.
      await owner.client.get(`/panel/applications/${clientId.toLowerCase()}/revoke`),
    ];
    for (const attempt of attempts) {
      expect(attempt.status).toBe(404);
      expect(attempt.headers.get("content-type")).toBe("text/html; charset=utf-8");
      expect(attempt.text).not.toContain("Owner secret app");
      expect(attempt.text).not.toContain("csec_");
      // Exactly like a page that does not exist (the request id aside).
      expect(attempt.text.replace(/req_[0-9A-Za-z]+/g, "")).toBe(
        unknown.text.replace(/req_[0-9A-Za-z]+/g, ""),
      );
    }
    const stored = await findApplicationByClientId(env.deps.db, clientId);
    expect(stored?.revokedAt).toBeNull();
    expect((await tokenRequest(clientId, clientSecret)).status).toBe(200);
  });

  test("signed out: application pages send to sign-in, actions change nothing", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const { clientId } = await createViaPanel(client, "Signed out");
    await client.post("/panel/sign-out");
    const page = await client.get(`/panel/applications/${clientId}/revoke`);
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toStartWith("/panel/sign-in?next=");
    const action = await client.post(`/panel/applications/${clientId}/revoke`);
    expect(action.status).toBe(303);
    expect((await findApplicationByClientId(env.deps.db, clientId))?.revokedAt).toBeNull();
  });
});

describe("application service: tenant-scoped variants", () => {
  test("rotate and revoke with a tenantId touch only that tenant's application; without one, any", async () => {
    const owner = await signedInClient(env.app, env.deps);
    const other = await signedInClient(env.app, env.deps);
    const { application } = await createApplication(env.deps.db, {
      tenantId: owner.tenant.id,
      name: "Scoped",
    });
    const id = application.clientId;
    expect(await rotateApplicationSecret(env.deps.db, id, { tenantId: other.tenant.id })).toBeUndefined();
    expect(
      await revokeApplication(env.deps.db, id, env.clock, { tenantId: other.tenant.id }),
    ).toBeUndefined();
    expect((await findApplicationByClientId(env.deps.db, id))?.revokedAt).toBeNull();
    expect(await rotateApplicationSecret(env.deps.db, id, { tenantId: owner.tenant.id })).toBeDefined();
    expect(
      (await revokeApplication(env.deps.db, id, env.clock, { tenantId: owner.tenant.id }))?.revokedAt,
    ).not.toBeNull();
    expect(await rotateApplicationSecret(env.deps.db, id, { unrevoked: true })).toBeUndefined();
    // The operator's unscoped call (CLI) still works.
    expect(await rotateApplicationSecret(env.deps.db, id)).toBeDefined();
  });
});
