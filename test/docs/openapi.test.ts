import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import { EVENT_TYPES } from "../../src/events/schemas.ts";
import { API_ERRORS, OAUTH_ERRORS } from "../../src/http/errors.ts";
import { call, createTenantWithApp, createTestEnv, getToken, type TestEnv } from "../support/index.ts";

// biome-ignore lint/suspicious/noExplicitAny: the document is arbitrary JSON
type Json = any;

let env: TestEnv;
let doc: Json;
let ajv: Ajv2020;

const METHODS = ["get", "post", "put", "patch", "delete"];
/** The document and the reference page serve themselves; everything else under /v2 is documented. */
const isOwnRoute = (path: string) =>
  path === "/v2/openapi.json" || path === "/v2/reference" || path.startsWith("/v2/reference/");

function operations(): { path: string; method: string; op: Json }[] {
  return Object.entries(doc.paths as Record<string, Json>).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((method) => ({ path, method, op: item[method] })),
  );
}

function operation(method: string, path: string): Json {
  const op = doc.paths[path]?.[method];
  if (!op) throw new Error(`${method.toUpperCase()} ${path} is not documented`);
  return op;
}

function deref(node: Json): Json {
  const ref = node?.$ref as string | undefined;
  if (!ref) return node;
  return ref
    .split("/")
    .slice(1)
    .reduce((at: Json, key: string) => at[key], doc);
}

/** The documented JSON schema of an operation's answer. */
function responseSchema(method: string, path: string, status: number): Json {
  const schema = operation(method, path).responses[String(status)]?.content?.["application/json"]?.schema;
  if (!schema) throw new Error(`${method.toUpperCase()} ${path} documents no ${status} JSON answer`);
  return schema;
}

/** Ajv's verdict on `value` against a documented schema; undefined when it conforms. */
function validate(schema: Json, value: unknown): string | undefined {
  // Component references resolve in the document registered as "openapi.json" (see beforeAll).
  const check = ajv.compile(
    JSON.parse(JSON.stringify(schema).replaceAll('"#/components/', '"openapi.json#/components/')),
  );
  return check(value) ? undefined : ajv.errorsText(check.errors);
}

beforeAll(async () => {
  // The reference page and its assets are fetched anonymously, as a browser would; tokens are fetched
  // several times a second. Neither is what this file tests.
  env = await createTestEnv({ limits: { anonymous: 1000, token: 1000 } });
  const response = await call(env.app, "GET", "/v2/openapi.json");
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("application/json");
  doc = response.body;
  ajv = new Ajv2020({ strict: false, validateFormats: false });
  // Component `$ref`s ("#/components/schemas/X") resolve against this id.
  ajv.addSchema({ $id: "openapi.json", components: doc.components });
});

afterAll(async () => {
  await env.close();
});

describe("GET /v2/openapi.json", () => {
  test("is a valid OpenAPI 3.1 document", async () => {
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
    expect(doc.info.version).toBe("2.0.0");
    // Paths are relative to {base_url}, which already ends in /v2 (SPEC §1).
    expect(doc.servers).toEqual([{ url: env.config.publicBaseUrl, description: expect.any(String) }]);
  });

  test("documents every route the app serves under /v2, and nothing else", () => {
    const served = env.app.routes.filter((r) => r.path.startsWith("/v2/") && !isOwnRoute(r.path));
    expect(served.length).toBeGreaterThanOrEqual(11);
    for (const route of served) {
      const path = route.path.slice("/v2".length).replace(/:([^/]+)/g, "{$1}");
      expect(`${route.method} ${path}: ${Boolean(doc.paths[path]?.[route.method.toLowerCase()])}`).toBe(
        `${route.method} ${path}: true`,
      );
    }
    const documented = operations().map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    const routeKeys = served.map((r) => `${r.method} ${r.path.slice(3).replace(/:([^/]+)/g, "{$1}")}`);
    expect(documented.sort()).toEqual(routeKeys.sort());
    // SPEC §4, by name.
    for (const endpoint of [
      "POST /oauth/token",
      "GET /messages",
      "POST /messages",
      "POST /media",
      "GET /senders",
      "GET /senders/{sender_id}/templates",
      "GET /contacts/{contact_id}",
      "GET /contacts",
      "GET /conversations",
      "GET /contacts/{contact_id}/messages",
    ]) {
      expect(documented).toContain(endpoint);
    }
    // Webhooks, panel, health, metrics and operations stay out of the public document.
    for (const path of Object.keys(doc.paths)) {
      expect(path).not.toMatch(/^\/(v2|panel|webhooks|healthz|readyz|metrics|ops|reference|openapi)/);
    }
  });

  test("every operation is named, tagged and secured", () => {
    const tags = new Set(doc.tags.map((t: Json) => t.name));
    const ids = new Set<string>();
    for (const { method, path, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      expect(typeof op.operationId, where).toBe("string");
      expect(ids.has(op.operationId), where).toBe(false);
      ids.add(op.operationId);
      expect(op.summary, where).toBeTruthy();
      expect(op.tags.length, where).toBeGreaterThan(0);
      for (const tag of op.tags) expect(tags.has(tag), `${where} tag ${tag}`).toBe(true);
      expect(Array.isArray(op.security), where).toBe(true);
      const scope = op["x-scope"];
      if (scope) {
        expect(op.security, where).toEqual([{ oauth2: [scope] }]);
      }
    }
    expect(doc.info.contact).toMatchObject({ name: expect.any(String), url: expect.any(String) });
    expect(doc.info.license.name).toBeTruthy();
    // One scheme: the reference's Authorize dialog offers one way in, the client credentials flow.
    const schemes = doc.components.securitySchemes;
    expect(Object.keys(schemes)).toEqual(["oauth2"]);
    expect(Object.keys(schemes.oauth2.flows)).toEqual(["clientCredentials"]);
    expect(schemes.oauth2.flows.clientCredentials.tokenUrl).toBe(`${env.config.publicBaseUrl}/oauth/token`);
    expect(Object.keys(schemes.oauth2.flows.clientCredentials.scopes).sort()).toEqual([
      "messaging:read",
      "messaging:send",
      "webhooks:manage",
    ]);
    // Managing a webhook endpoint is its own scope; reading one is messaging:read.
    expect(operation("post", "/webhook_endpoints/{endpoint_id}/rotate_secret").security).toEqual([
      { oauth2: ["webhooks:manage"] },
    ]);
    expect(operation("get", "/webhook_endpoints/{endpoint_id}").security).toEqual([
      { oauth2: ["messaging:read"] },
    ]);
    // The token endpoint takes the client's credentials (HTTP Basic or the body), not a token.
    expect(operation("post", "/oauth/token").security).toEqual([]);
    expect(operation("post", "/oauth/token").description).toContain("HTTP Basic");
    expect(operation("get", "/messages")["x-scope"]).toBe("messaging:read");
    expect(operation("post", "/messages")["x-scope"]).toBe("messaging:send");
    expect(operation("post", "/media")["x-scope"]).toBe("messaging:send");
  });

  test("every operation lists the error responses it can return", () => {
    for (const { method, path, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      const statuses = Object.keys(op.responses);
      // Any /v2 request may be rate limited, fail on our side, or meet an unreachable dependency.
      for (const status of ["429", "500", "503"]) expect(statuses, where).toContain(status);
      if (op["x-scope"]) for (const status of ["401", "403"]) expect(statuses, where).toContain(status);

      const token = path === "/oauth/token";
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        const at = `${where} ${status}`;
        expect(response.headers?.["Request-Id"], at).toEqual({ $ref: "#/components/headers/RequestId" });
        // The rate-limit headers, described once in components/headers, are listed on the answers
        // a client paces itself by (success and 429), and nowhere else.
        const paced = Number(status) < 400 || status === "429";
        for (const name of ["RateLimit-Limit", "RateLimit-Policy", "X-RateLimit-Reset"]) {
          expect(response.headers[name], `${at} ${name}`).toEqual(
            paced ? { $ref: `#/components/headers/${name.replaceAll("-", "")}` } : undefined,
          );
        }
        if (Number(status) < 400) continue;
        const media = response.content["application/json"];
        expect(media.schema, at).toEqual({
          $ref: `#/components/schemas/${token ? "OAuthError" : "ErrorResponse"}`,
        });
        const codes = Object.keys(media.examples);
        expect(codes.length, at).toBeGreaterThan(0);
        for (const code of codes) {
          expect(response.description, at).toContain(`\`${code}\``);
          const example = media.examples[code].value;
          expect(validate(media.schema, example), `${at} ${code}`).toBeUndefined();
          if (token) {
            expect(example.error, at).toBe(code);
            expect(code in OAUTH_ERRORS, at).toBe(true);
          } else {
            const entry = API_ERRORS[code as keyof typeof API_ERRORS];
            expect<number | undefined>(entry?.status, `${at} ${code}`).toBe(Number(status));
            expect(example.error.type, at).toBe(entry.type);
            expect(example.error.doc_url, at).toBe(`${env.config.publicBaseUrl}/docs#${code}`);
          }
        }
        if (status === "429" || status === "503") expect(response.headers["Retry-After"], at).toBeDefined();
        if (status === "401" || status === "403")
          expect(response.headers["WWW-Authenticate"], at).toBeDefined();
      }
    }
  });

  test("each endpoint lists at least the error statuses SPEC §4 gives it", () => {
    const spec: Record<string, number[]> = {
      "post /oauth/token": [400, 401, 429],
      "get /messages": [400, 401, 403, 429],
      "post /messages": [400, 401, 403, 404, 409, 429],
      "post /media": [400, 401, 403, 429],
      "get /senders": [401, 403, 429],
      "get /senders/{sender_id}/templates": [400, 401, 403, 429],
      "get /contacts/{contact_id}": [400, 401, 404, 429],
      "get /contacts": [400, 401, 404, 429],
      "get /conversations": [401, 403, 429],
      "get /contacts/{contact_id}/messages": [400, 401, 404, 429],
    };
    for (const [key, statuses] of Object.entries(spec)) {
      const [method, path] = key.split(" ") as [string, string];
      const documented = Object.keys(operation(method, path).responses).map(Number);
      for (const status of statuses) expect(documented, key).toContain(status);
    }
    const codesAt = (method: string, path: string, status: number) =>
      Object.keys(operation(method, path).responses[String(status)].content["application/json"].examples);
    expect(codesAt("post", "/messages", 400)).toEqual(
      expect.arrayContaining(["parameter_conflict", "template_not_found", "idempotency_key_reused"]),
    );
    expect(codesAt("post", "/messages", 409)).toEqual([
      "messaging_window_closed",
      "recipient_phone_required",
      "idempotency_key_in_use",
    ]);
    expect(codesAt("post", "/messages", 429)).toEqual(["rate_limit_exceeded", "quota_exceeded"]);
    expect(codesAt("post", "/messages", 413)).toEqual(["request_too_large"]);
    expect(codesAt("get", "/contacts/{contact_id}", 404)).toEqual(["resource_missing"]);
    expect(codesAt("post", "/oauth/token", 400)).toEqual(
      expect.arrayContaining(["invalid_request", "unsupported_grant_type"]),
    );
    expect(codesAt("post", "/oauth/token", 401)).toEqual(["invalid_client"]);
    const closed = operation("post", "/messages").responses["409"].content["application/json"].examples;
    expect(closed.messaging_window_closed.value.error.messaging_state.requires_template).toBe(true);
    // Replays say so in a header.
    expect(operation("post", "/messages").responses["200"].headers["Idempotency-Replayed"]).toBeDefined();
  });

  test("describes request bodies and parameters with their constraints", () => {
    const token = operation("post", "/oauth/token").requestBody;
    expect(Object.keys(token.content).sort()).toEqual([
      "application/json",
      "application/x-www-form-urlencoded",
    ]);
    expect(deref(token.content["application/json"].schema).properties.grant_type).toBeDefined();

    const media = operation("post", "/media").requestBody;
    expect(Object.keys(media.content)).toEqual(["multipart/form-data"]);
    const upload = deref(media.content["multipart/form-data"].schema);
    // OpenAPI 3.1 files: a string with a media type, not 3.0's `format: binary`.
    expect(upload.properties.file).toMatchObject({
      type: "string",
      contentMediaType: "application/octet-stream",
    });
    expect(upload.properties.file.format).toBeUndefined();
    expect(upload.required).toEqual(["file"]);

    const send = operation("post", "/messages");
    expect(Object.keys(send.requestBody.content)).toEqual(["application/json"]);
    const request = send.requestBody.content["application/json"];
    expect(request.schema).toEqual({ $ref: "#/components/schemas/SendMessageRequest" });
    for (const { value } of Object.values(request.examples as Record<string, Json>)) {
      expect(validate(request.schema, value)).toBeUndefined();
    }
    // Exactly one of each pair, as the service demands (it answers each mistake with its own code).
    const template = { name: "welcome" };
    for (const wrong of [
      { to: "+4915123456789", template, body: "Hi" },
      { to: "+4915123456789" },
      { to: "+4915123456789", contact: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY", body: "Hi" },
      { body: "Hi" },
      { to: "+4915123456789", body: "Hi", colour: "red" },
    ]) {
      expect(validate(request.schema, wrong), JSON.stringify(wrong)).toBeDefined();
    }
    for (const right of [
      { to: "+4915123456789", template },
      { contact: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY", body: "Hi", sender: "snd_7Kp2Qr9sTvWx3yZa5bCdEf" },
    ]) {
      expect(validate(request.schema, right), JSON.stringify(right)).toBeUndefined();
    }
    expect(send.parameters).toContainEqual(
      expect.objectContaining({ name: "Idempotency-Key", in: "header", required: false }),
    );

    const param = (method: string, path: string, name: string) =>
      operation(method, path).parameters.find((p: Json) => p.name === name);
    expect(param("get", "/conversations", "limit")).toMatchObject({
      in: "query",
      required: false,
      schema: { type: "integer", minimum: 1, maximum: 100, default: 25 },
    });
    expect(param("get", "/conversations", "before").schema.type).toBe("integer");
    expect(param("get", "/conversations", "order").schema).toMatchObject({
      enum: ["asc", "desc"],
      default: "desc",
    });
    expect(param("get", "/contacts/{contact_id}/messages", "limit").schema).toMatchObject({
      maximum: 200,
      default: 50,
    });
    expect(param("get", "/contacts/{contact_id}/messages", "order").schema.default).toBe("asc");
    expect(param("get", "/messages", "limit").schema).toMatchObject({ maximum: 500, default: 100 });
    expect(param("get", "/messages", "since")).toMatchObject({ in: "query", required: false });
    // Exactly one of phone and user_id (the service says which is missing or extra).
    expect(param("get", "/contacts", "phone")).toMatchObject({ in: "query", required: false });
    expect(param("get", "/contacts", "user_id")).toMatchObject({ in: "query", required: false });
    expect(param("get", "/contacts/{contact_id}", "contact_id")).toMatchObject({
      in: "path",
      required: true,
      schema: { type: "string", pattern: expect.stringContaining("ctc_") },
    });
    expect(param("get", "/senders/{sender_id}/templates", "sender_id").in).toBe("path");
    // Nothing of Elysia's own encoding leaks into the document.
    const text = JSON.stringify(doc);
    for (const leak of ['"nullable"', '"x-param"', '"format":"integer"', '"default":"File"']) {
      expect(text).not.toContain(leak);
    }
    // Integrators never see our internal documents: RFC sections only.
    expect(text.match(/\b(SPEC|DESIGN)\b|[^0-9] §/g)).toBeNull();
  });

  test("the main objects have schemas with the SPEC fields and examples that match them", () => {
    const fields: Record<string, string[]> = {
      Message: ["object", "id", "status", "direction", "channel", "sender", "to", "content", "created"],
      HistoryMessage: ["object", "id", "direction", "type", "preview", "text", "media", "status", "created"],
      FeedMessage: [
        "object",
        "id",
        "direction",
        "type",
        "preview",
        "text",
        "media",
        "status",
        "created",
        "contact",
      ],
      Contact: ["object", "id", "name", "phone", "channel", "messaging"],
      MessagingState: ["sendable", "within_window", "window_expires_at", "requires_template", "opted_out"],
      Sender: ["object", "id", "channel", "name", "phone_number"],
      Template: ["object", "id", "name", "language", "category", "variables", "preview"],
      Conversation: ["object", "contact", "last_message", "unread"],
      Media: ["object", "id", "type", "filename", "mime_type"],
      TokenResponse: ["access_token", "token_type", "expires_in", "scope"],
      OAuthError: ["error", "error_description", "request_id"],
      ErrorResponse: ["error"],
    };
    const schemas = doc.components.schemas;
    // The checks below are not vacuous: a wrong object is refused.
    expect(validate({ $ref: "#/components/schemas/Message" }, { object: "message" })).toContain("required");
    expect(
      validate({ $ref: "#/components/schemas/Contact" }, { ...schemas.Contact.examples[0], messaging: {} }),
    ).toBeDefined();
    for (const [name, required] of Object.entries(fields)) {
      expect(schemas[name], name).toBeDefined();
      expect(schemas[name].required, name).toEqual(expect.arrayContaining(required));
      if (name === "OAuthError" || name === "ErrorResponse") continue;
      expect(schemas[name].examples?.length, `${name} examples`).toBeGreaterThan(0);
      for (const example of schemas[name].examples) {
        expect(validate({ $ref: `#/components/schemas/${name}` }, example), name).toBeUndefined();
      }
    }
    expect(schemas.ErrorResponse.properties.error.required).toEqual([
      "type",
      "code",
      "message",
      "param",
      "request_id",
      "doc_url",
    ]);
    expect(schemas.ErrorResponse.properties.error.properties.messaging_state).toEqual({
      $ref: "#/components/schemas/MessagingState",
    });
    expect(responseSchema("post", "/messages", 201)).toEqual({ $ref: "#/components/schemas/Message" });
    expect(responseSchema("get", "/contacts/{contact_id}", 200)).toEqual({
      $ref: "#/components/schemas/Contact",
    });
    const feed = deref(responseSchema("get", "/messages", 200));
    expect(feed.properties.next_cursor).toBeDefined();
    expect(feed.properties.data.items).toEqual({ $ref: "#/components/schemas/FeedMessage" });
    expect(deref(responseSchema("get", "/conversations", 200)).properties.data.items).toEqual({
      $ref: "#/components/schemas/Conversation",
    });
  });

  test("real answers match the documented schemas and headers", async () => {
    const reader = await createTenantWithApp(env.deps, { scopes: ["messaging:read"] });
    const readToken = await getToken(env.app, reader.clientId, reader.clientSecret);
    const sendToken = await getToken(
      env.app,
      ...(await createTenantWithApp(env.deps, { scopes: ["messaging:send"] }).then(
        (a) => [a.clientId, a.clientSecret] as const,
      )),
    );
    const cases: { method: string; path: string; status: number; request: Parameters<typeof call>[3] }[] = [
      {
        method: "post",
        path: "/oauth/token",
        status: 200,
        request: {
          body: {
            grant_type: "client_credentials",
            client_id: reader.clientId,
            client_secret: reader.clientSecret,
          },
        },
      },
      {
        method: "post",
        path: "/oauth/token",
        status: 401,
        request: {
          body: { grant_type: "client_credentials", client_id: reader.clientId, client_secret: "nope" },
        },
      },
      { method: "get", path: "/senders", status: 200, request: { token: readToken } },
      { method: "get", path: "/senders", status: 401, request: {} },
      { method: "get", path: "/senders", status: 403, request: { token: sendToken } },
      { method: "get", path: "/conversations", status: 200, request: { token: readToken } },
      { method: "get", path: "/conversations?limit=0", status: 400, request: { token: readToken } },
      { method: "get", path: "/messages", status: 200, request: { token: readToken } },
      { method: "get", path: "/contacts/ctc_missing", status: 404, request: { token: readToken } },
      { method: "post", path: "/messages", status: 400, request: { token: sendToken, body: {} } },
    ];
    for (const { method, path, status, request } of cases) {
      const answer = await call(env.app, method.toUpperCase(), `/v2${path}`, request);
      const where = `${method.toUpperCase()} ${path}`;
      expect(answer.status, `${where}: ${answer.text}`).toBe(status);
      const documentedPath =
        path === "/contacts/ctc_missing" ? "/contacts/{contact_id}" : path.replace(/\?.*$/, "");
      const documented = operation(method, documentedPath).responses[String(status)];
      expect(validate(documented.content["application/json"].schema, answer.body), where).toBeUndefined();
      for (const [name, header] of Object.entries(documented.headers as Record<string, Json>)) {
        if (deref(header).required) expect(answer.headers.get(name), `${where} ${name}`).not.toBeNull();
      }
      expect(answer.headers.get("ratelimit-limit"), where).not.toBeNull();
    }
  });
});

describe("webhooks (what a receiver is posted)", () => {
  test("one POST per event type, its body the Event component, with the three Standard Webhooks headers", () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual([...EVENT_TYPES].sort());
    const ids = new Set(operations().map(({ op }) => op.operationId));
    const tags = new Set(doc.tags.map((t: Json) => t.name));
    for (const type of EVENT_TYPES) {
      const item = doc.webhooks[type];
      expect(Object.keys(item), type).toEqual(["post"]);
      const op = item.post;
      // Named and tagged like an operation, and named apart from every path's operation.
      expect(op.operationId, type).toEqual(expect.any(String));
      expect(ids.has(op.operationId), type).toBe(false);
      ids.add(op.operationId);
      expect(op.summary, type).toContain(type);
      for (const tag of op.tags) expect(tags.has(tag), `${type} tag ${tag}`).toBe(true);
      // The receiver authenticates a delivery by its signature, not by one of our credentials.
      expect(op.security, type).toEqual([]);

      const media = op.requestBody.content["application/json"];
      expect(op.requestBody.required, type).toBe(true);
      expect(Object.keys(op.requestBody.content), type).toEqual(["application/json"]);
      expect(media.schema, type).toEqual({ $ref: "#/components/schemas/Event" });
      const examples = Object.values(media.examples as Record<string, Json>);
      expect(examples.length, type).toBeGreaterThan(0);
      for (const { value } of examples) {
        expect(validate(media.schema, value), type).toBeUndefined();
        expect(value.type, type).toBe(type);
      }
      const headers = op.parameters.map(deref);
      expect(
        headers.map((p: Json) => [p.name, p.in, p.required]),
        type,
      ).toEqual([
        ["webhook-id", "header", true],
        ["webhook-timestamp", "header", true],
        ["webhook-signature", "header", true],
      ]);
      for (const header of headers) expect(header.description, `${type} ${header.name}`).toBeTruthy();

      // Any 2xx acknowledges; 410 disables the endpoint; anything else is retried.
      expect(Object.keys(op.responses).sort(), type).toEqual(["2XX", "410", "default"]);
      expect(op.responses.default.description, type).toMatch(/retried/);
      for (const promise of [
        /2xx/,
        /5 seconds/,
        /1 hour/,
        /3 days/,
        /410/,
        /per contact|one contact/,
        /webhook-id/,
      ]) {
        expect(op.description, `${type} ${promise}`).toMatch(promise);
      }
      expect(op.description, type).toContain("docs/webhooks.md");
    }
    expect(doc.webhooks["message.failed"].post.description).toContain("data.failure");
    // The Event component is the one GET /events lists.
    expect(deref(responseSchema("get", "/events", 200)).properties.data.items).toEqual({
      $ref: "#/components/schemas/Event",
    });
    expect(doc.components.schemas.Event.properties.type.enum).toEqual([...EVENT_TYPES]);
  });

  test("a signature header that does not match the pattern is told apart", () => {
    const signature = deref({ $ref: "#/components/parameters/WebhookSignature" }).schema;
    expect(validate(signature, "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=")).toBeUndefined();
    expect(validate(signature, "v1,AAAA= v1,BBBB=")).toBeUndefined();
    expect(validate(signature, "v1a,AAAA=")).toBeDefined();
    const id = deref({ $ref: "#/components/parameters/WebhookId" }).schema;
    expect(validate(id, "evt_2Hj8Kl4mNp6Qr8St0UvWxY")).toBeUndefined();
    expect(validate(id, "evt_test_0a1b2c3d4e5f60718293a4b5")).toBeUndefined();
    expect(validate(id, "msg_2Hj8Kl4mNp6Qr8St0UvWxY")).toBeDefined();
  });
});

describe("GET /v2/reference", () => {
  test("is an HTML page whose scripts and styles come from this service", async () => {
    const page = await call(env.app, "GET", "/v2/reference");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    // No script, style or font host but ours: the page works offline.
    expect(page.text).not.toMatch(/(src|href)\s*=\s*["']?(https?:)?\/\//i);
    expect(page.text).not.toMatch(/https?:\/\//);
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toMatch(/script-src 'self' 'sha256-[^']+'(;|$)/);
    expect(page.text).toContain('"/v2/openapi.json"');

    const assets = [...page.text.matchAll(/<(?:script src|link rel="stylesheet" href)="([^"]+)"/g)].map(
      (m) => m[1]!,
    );
    expect(assets.length).toBe(2);
    for (const url of assets) {
      expect(url).toMatch(/^\/v2\/reference\/[\w.-]+\.(js|css)\?v=[\d.]+$/);
      const asset = await call(env.app, "GET", url.replaceAll("&amp;", "&"));
      expect(asset.status, url).toBe(200);
      expect(asset.headers.get("content-type"), url).toMatch(
        url.includes(".js") ? /javascript/ : /text\/css/,
      );
      expect(asset.headers.get("cache-control"), url).toBe("public, max-age=31536000, immutable");
      expect(asset.headers.get("content-range"), url).toBeNull();
      expect(asset.text.length, url).toBeGreaterThan(100_000);
    }
    expect(assets.some((url) => url.includes("swagger-ui-bundle.js"))).toBe(true);
  });

  test("its own files are not rate-limited: quick reloads never use up the anonymous limit", async () => {
    const paths = ["/v2/reference", "/v2/reference/swagger-ui.css", "/v2/reference/swagger-ui-bundle.js"];
    for (let reload = 0; reload < 4; reload++) {
      for (const path of paths) {
        const response = await call(env.app, "GET", path);
        expect(response.status, path).toBe(200);
        expect(response.headers.get("ratelimit-limit"), path).toBeNull();
      }
    }
  });
});
