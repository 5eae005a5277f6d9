/**
 * Issue 22: the webhook endpoint resource (DESIGN §12): create with a secret shown once, list, get,
 * update, delete, rotate_secret, replay; URL rules; the per-tenant limit; another tenant's is 404.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { sql } from "kysely";
import { createApp } from "../../src/app.ts";
import { findApplicationByClientId } from "../../src/applications/repository.ts";
import { createApplication } from "../../src/applications/service.ts";
import { ENDPOINTS_PER_TENANT } from "../../src/push/schemas.ts";
import { endpointAddressProblem } from "../../src/push/url-safety.ts";
import {
  call,
  createTenantWithApp,
  createTestEnv,
  expectApiError,
  getToken,
  type TestEnv,
} from "../support/index.ts";

let env: TestEnv;
let token: string;
let otherToken: string;
let created: Awaited<ReturnType<typeof createTenantWithApp>>;
const URL = "https://hooks.example.com/messaging";

beforeAll(async () => {
  env = await createTestEnv();
  created = await createTenantWithApp(env.deps);
  token = await getToken(env.app, created.clientId, created.clientSecret);
  const other = await createTenantWithApp(env.deps, { name: "Other" });
  otherToken = await getToken(env.app, other.clientId, other.clientSecret);
});
afterAll(() => env.close());

function create(body: unknown, as = token) {
  return call(env.app, "POST", "/v2/webhook_endpoints", { token: as, body });
}

describe("webhook endpoints", () => {
  test("create: 201 with every field, a whsec_ secret shown only here, all types by default, at the head", async () => {
    const response = await create({ url: URL, description: "orders" });
    expect(response.status).toBe(201);
    const { id, secret, delivery } = structuredClone(response.body);
    expect(response.body).toMatchObject({
      object: "webhook_endpoint",
      id: expect.stringMatching(/^we_/),
      url: URL,
      // The wire contract, pinned on purpose (the other tests read src/events/schemas.ts EVENT_TYPES).
      events: [
        "message.received",
        "message.sent",
        "message.delivered",
        "message.read",
        "message.failed",
        "message.canceled",
        "contact.merged",
      ],
      // Every type, new ones included (created without events).
      all_events: true,
      description: "orders",
      status: "enabled",
      disabled_reason: null,
      created: expect.any(Number),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]+=*$/),
      delivery: {
        cursor: expect.stringMatching(/^evc_/),
        pending: 0,
        oldest_pending_age: null,
        last_success_at: null,
        last_failure: null,
      },
    });
    const key = Buffer.from(secret.slice("whsec_".length), "base64");
    expect(key.length).toBeGreaterThanOrEqual(24);
    expect(key.length).toBeLessThanOrEqual(64);
    const got = await call(env.app, "GET", `/v2/webhook_endpoints/${id}`, { token });
    expect(got.status).toBe(200);
    expect(got.body.secret).toBeUndefined();
    expect(got.body.delivery.cursor).toBe(delivery.cursor);
    // The cursor reads the event log.
    const events = await call(env.app, "GET", `/v2/events?since=${got.body.delivery.cursor}`, { token });
    expect(events.status).toBe(200);
  });

  test("list, update, disable and enable, delete", async () => {
    const { body: endpoint } = await create({ url: URL, events: ["message.received"] });
    const list = await call(env.app, "GET", "/v2/webhook_endpoints", { token });
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ object: "list", url: "/v2/webhook_endpoints", has_more: false });
    expect(list.body.data.map((e: { id: string }) => e.id)).toContain(endpoint.id);

    const path = `/v2/webhook_endpoints/${endpoint.id}`;
    const changed = await call(env.app, "PATCH", path, {
      token,
      body: {
        url: "https://hooks.example.com/v2",
        events: ["message.read", "message.failed"],
        description: null,
      },
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({
      url: "https://hooks.example.com/v2",
      events: ["message.read", "message.failed"],
      description: null,
    });
    const disabled = await call(env.app, "PATCH", path, { token, body: { status: "disabled" } });
    expect(disabled.body).toMatchObject({ status: "disabled", disabled_reason: null });
    const enabled = await call(env.app, "PATCH", path, { token, body: { status: "enabled" } });
    expect(enabled.body.status).toBe("enabled");

    const deleted = await call(env.app, "DELETE", path, { token });
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ object: "webhook_endpoint", id: endpoint.id, deleted: true });
    expect((await call(env.app, "GET", path, { token })).status).toBe(404);
    expect((await call(env.app, "DELETE", path, { token })).status).toBe(404);
  });

  test("another tenant's endpoint, or an unknown id, is 404 resource_missing for every call", async () => {
    const { body: endpoint } = await create({ url: URL });
    const path = `/v2/webhook_endpoints/${endpoint.id}`;
    const attempts = [
      call(env.app, "GET", path, { token: otherToken }),
      call(env.app, "PATCH", path, { token: otherToken, body: { description: "x" } }),
      call(env.app, "DELETE", path, { token: otherToken }),
      call(env.app, "POST", `${path}/rotate_secret`, { token: otherToken }),
      call(env.app, "POST", `${path}/replay`, { token: otherToken, body: { since: null } }),
      call(env.app, "GET", "/v2/webhook_endpoints/we_doesnotexist", { token }),
    ];
    for (const response of await Promise.all(attempts)) {
      expect(response.status).toBe(404);
      expect(response.body.error.code).toBe("resource_missing");
    }
    const theirs = await call(env.app, "GET", "/v2/webhook_endpoints", { token: otherToken });
    expect(theirs.body.data.map((e: { id: string }) => e.id)).not.toContain(endpoint.id);
    expect((await call(env.app, "GET", path, { token })).status).toBe(200);
  });

  test("PATCH with nothing to change ({}) answers 200 with the endpoint unchanged", async () => {
    const { body: endpoint } = await create({ url: URL, events: ["message.read"], description: "kept" });
    const path = `/v2/webhook_endpoints/${endpoint.id}`;
    const before = (await call(env.app, "GET", path, { token })).body;
    const patched = await call(env.app, "PATCH", path, { token, body: {} });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual(before);
    expect((await call(env.app, "GET", path, { token })).body).toEqual(before);
    // Still 404 for an id that is not the caller's.
    const foreign = await call(env.app, "PATCH", path, { token: otherToken, body: {} });
    expectApiError(foreign, 404, "resource_missing", "endpoint_id");
  });

  test("events: [] says what is wrong (not 'expected an array'), on create and on update", async () => {
    const { body: endpoint } = await create({ url: URL });
    const answers: [Awaited<ReturnType<typeof create>>, string][] = [
      [await create({ url: URL, events: [] }), "omit events to receive every type"],
      // On PATCH, omitting events keeps them: null is every type.
      [
        await call(env.app, "PATCH", `/v2/webhook_endpoints/${endpoint.id}`, { token, body: { events: [] } }),
        "or null to receive every type",
      ],
    ];
    for (const [response, everyType] of answers) {
      expectApiError(response, 400, "parameter_invalid", "events");
      expect(response.body.error.message).toContain("at least one event type");
      expect(response.body.error.message).toContain(everyType);
    }
    const twice = await create({ url: URL, events: ["message.read", "message.read"] });
    expect(twice.body.error.message).toContain("each named once");
  });

  test("validation messages of the endpoint bodies point the right way", async () => {
    const { body: endpoint } = await create({ url: URL });
    const path = `/v2/webhook_endpoints/${endpoint.id}`;
    const cases: [Promise<Awaited<ReturnType<typeof create>>>, string, string][] = [
      [create({ url: URL, description: 5 }), "description", "a string of at most 500 characters, or null"],
      [create({ url: URL, description: "x".repeat(501) }), "description", "at most 500 characters"],
      [create({ url: 42 }), "url", "an https URL of at most"],
      [call(env.app, "PATCH", path, { token, body: { url: null } }), "url", "an https URL"],
      [
        call(env.app, "POST", `${path}/replay`, { token, body: { since: 5 } }),
        "since",
        "an `evc_` cursor, or null",
      ],
    ];
    for (const [answer, param, words] of cases) {
      const response = await answer;
      expectApiError(response, 400, "parameter_invalid", param);
      expect(response.body.error.message).toContain(words);
      expect(response.body.error.message).not.toContain("another type");
    }
  });

  test("bad bodies: 400 in the envelope, naming the parameter", async () => {
    const cases: [unknown, string][] = [
      [{}, "url"],
      [{ url: "not a url" }, "url"],
      [{ url: "ftp://hooks.example.com" }, "url"],
      [{ url: URL, events: [] }, "events"],
      [{ url: URL, events: ["message.unknown"] }, "events.0"],
      [{ url: URL, extra: 1 }, "extra"],
    ];
    for (const [body, param] of cases) {
      const response = await create(body);
      expect(response.status).toBe(400);
      expect(response.body.error.param).toBe(param);
    }
  });

  test("rotate_secret: a new secret, shown once; replay: a cursor of another tenant is 400 since", async () => {
    const { body: endpoint } = await create({ url: URL });
    const rotated = await call(env.app, "POST", `/v2/webhook_endpoints/${endpoint.id}/rotate_secret`, {
      token,
    });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(endpoint.secret);

    const replay = (since: unknown) =>
      call(env.app, "POST", `/v2/webhook_endpoints/${endpoint.id}/replay`, { token, body: { since } });
    expect((await replay(null)).status).toBe(200);
    expect((await replay(endpoint.delivery.cursor)).status).toBe(200);
    const garbage = await replay("evc_nonsense");
    expect(garbage.status).toBe(400);
    expect(garbage.body.error.param).toBe("since");
    const theirs = await call(env.app, "GET", "/v2/events", { token: otherToken });
    const foreign = await replay(theirs.body.next_cursor);
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.param).toBe("since");
    expect(foreign.body.error.message).toBe(
      "since is not an event cursor this service gave this account; pass the next_cursor of GET /v2/events, or a webhook endpoint's delivery.cursor.",
    );
  });

  test("replay with a feed cursor (fd_) names it as one, as GET /v2/events does (issue 42)", async () => {
    const { body: endpoint } = await create({ url: URL });
    const feedCursor = (await call(env.app, "GET", "/v2/messages", { token })).body.next_cursor;
    expect(feedCursor).toMatch(/^fd_/);
    const replay = await call(env.app, "POST", `/v2/webhook_endpoints/${endpoint.id}/replay`, {
      token,
      body: { since: feedCursor },
    });
    expectApiError(replay, 400, "parameter_invalid", "since");
    const onEvents = await call(env.app, "GET", `/v2/events?since=${feedCursor}`, { token });
    expect(replay.body.error.message).toBe(onEvents.body.error.message);
    expect(replay.body.error.message).toBe(
      "since is a feed cursor (fd_…, the next_cursor of GET /v2/messages); since here takes an event cursor (evc_…): the next_cursor of GET /v2/events, or a webhook endpoint's delivery.cursor.",
    );
  });

  test(`at most ${ENDPOINTS_PER_TENANT} per tenant: the next is 409 resource_limit_reached`, async () => {
    const fresh = await createTenantWithApp(env.deps, { name: "Many" });
    const freshToken = await getToken(env.app, fresh.clientId, fresh.clientSecret);
    for (let i = 0; i < ENDPOINTS_PER_TENANT; i++)
      expect((await create({ url: URL }, freshToken)).status).toBe(201);
    const over = await create({ url: URL }, freshToken);
    expect(over.status).toBe(409);
    expect(over.body.error.code).toBe("resource_limit_reached");
  });
});

describe("webhooks:manage (issue 42): a credential that only reads cannot take over the event stream", () => {
  test("a messaging:read token: 403 insufficient_scope on create, update, delete, rotate and replay; 200 on list and get", async () => {
    const { body: endpoint } = await create({ url: URL });
    const path = `/v2/webhook_endpoints/${endpoint.id}`;
    // Another application of the same tenant, holding only messaging:read.
    const readOnly = await createApplication(env.deps.db, {
      tenantId: created.tenant.id,
      name: "Dashboard",
      scopes: ["messaging:read"],
      readLimit: 1000,
    });
    const reader = await getToken(env.app, readOnly.application.clientId, readOnly.clientSecret);
    const managing: [string, string, unknown][] = [
      ["POST", "/v2/webhook_endpoints", { url: URL }],
      ["PATCH", path, { url: "https://attacker.example.com/x" }],
      ["DELETE", path, undefined],
      ["POST", `${path}/rotate_secret`, {}],
      ["POST", `${path}/replay`, { since: null }],
    ];
    for (const [method, target, body] of managing) {
      const refused = await call(env.app, method, target, { token: reader, body });
      expectApiError(refused, 403, "insufficient_scope", null);
      expect(refused.body.error.message).toContain("webhooks:manage");
      expect(refused.headers.get("www-authenticate")).toContain('scope="webhooks:manage"');
      expect(refused.text).not.toContain("whsec_");
    }
    expect((await call(env.app, "GET", "/v2/webhook_endpoints", { token: reader })).status).toBe(200);
    const read = await call(env.app, "GET", path, { token: reader });
    expect(read.status).toBe(200);
    // Nothing changed: same url, still there, and no secret in sight.
    expect(read.body).toMatchObject({ url: URL, status: "enabled" });
    expect(read.body.secret).toBeUndefined();
  });

  test("an application created without a choice of scopes has webhooks:manage", () => {
    expect(created.application.scopes).toEqual(["messaging:send", "messaging:read", "webhooks:manage"]);
  });

  test("sql/029 grants webhooks:manage to applications holding both messaging scopes, and to no other", async () => {
    const both = await createTenantWithApp(env.deps, { scopes: ["messaging:send", "messaging:read"] });
    const readOnly = await createTenantWithApp(env.deps, { scopes: ["messaging:read"] });
    const sendOnly = await createTenantWithApp(env.deps, { scopes: ["messaging:send"] });
    const migration = await Bun.file(join(import.meta.dir, "../../sql/029_webhooks_manage_scope.sql")).text();
    // Applied twice: the second run changes nothing.
    for (let run = 0; run < 2; run++) await sql.raw(migration).execute(env.deps.db);
    const scopesOf = async (clientId: string) =>
      (await findApplicationByClientId(env.deps.db, clientId))?.scopes;
    expect(await scopesOf(both.clientId)).toEqual(["messaging:send", "messaging:read", "webhooks:manage"]);
    expect(await scopesOf(readOnly.clientId)).toEqual(["messaging:read"]);
    expect(await scopesOf(sendOnly.clientId)).toEqual(["messaging:send"]);
    const granted = await getToken(env.app, both.clientId, both.clientSecret);
    const made = await call(env.app, "POST", "/v2/webhook_endpoints", { token: granted, body: { url: URL } });
    expect(made.status).toBe(201);
  });
});

describe("URL rules outside development", () => {
  test("http, loopback, private and link-local addresses and localhost are refused; a public https host is taken", async () => {
    const strict = createApp({
      ...env.deps,
      config: { ...env.config, webhooks: { ...env.config.webhooks, allowPrivateUrls: false } },
    });
    const refused = [
      "http://hooks.example.com/x",
      "https://127.0.0.1/x",
      "https://10.1.2.3/x",
      "https://169.254.169.254/latest",
      "https://[::1]/x",
      "https://[fd00::1]/x",
      "https://localhost:8443/x",
      "https://user:pw@hooks.example.com/x",
    ];
    for (const url of refused) {
      const response = await call(strict, "POST", "/v2/webhook_endpoints", { token, body: { url } });
      expect(response.status).toBe(400);
      expect(response.body.error).toMatchObject({ code: "parameter_invalid", param: "url" });
    }
    const fine = await call(strict, "POST", "/v2/webhook_endpoints", {
      token,
      body: { url: "https://93.184.215.14/x" },
    });
    expect(fine.status).toBe(201);
  });

  test("after DNS: a name resolving to a private address, or not at all, is refused", async () => {
    const resolvesTo = (addresses: string[]) => async () => addresses;
    expect(
      await endpointAddressProblem("https://hooks.example.com/", false, resolvesTo(["93.184.215.14"])),
    ).toBe(undefined);
    expect(
      await endpointAddressProblem(
        "https://rebind.example.com/",
        false,
        resolvesTo(["93.184.215.14", "10.0.0.5"]),
      ),
    ).toContain("private");
    expect(await endpointAddressProblem("https://v6.example.com/", false, resolvesTo(["fe80::1"]))).toContain(
      "private",
    );
    expect(
      await endpointAddressProblem("https://nowhere.example.com/", false, async () => {
        throw new Error("ENOTFOUND");
      }),
    ).toContain("does not resolve");
    // Allowed in development.
    expect(await endpointAddressProblem("http://127.0.0.1:9999/", true, resolvesTo([]))).toBe(undefined);
  });
});
