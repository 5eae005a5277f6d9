import { EVENT_TYPES, EventSchema } from "../events/schemas.ts";
import { JSON_BODY_LIMIT } from "../http/body.ts";
import { API_ERRORS, type ApiErrorCode, OAUTH_ERRORS, type OAuthErrorCode } from "../http/errors.ts";
import { DEFAULT_LIMITS } from "../http/rate-limit.ts";
import { POLICY_DETAIL_KEY } from "../http/route-policy.ts";
import {
  type DocumentedErrors,
  ERROR_CODES_KEY,
  ErrorResponse,
  OAuthErrorResponse,
} from "../http/schemas.ts";
import { METADATA_PATH } from "../oauth/metadata.ts";
import { TOKEN_LIFETIME_SECONDS } from "../oauth/tokens.ts";
import { Components, isObject, type Json } from "./openapi-schema.ts";

/**
 * `{base_url}/openapi.json`, built from the routes the app serves: their TypeBox schemas (the ones that
 * validate requests and responses), their `detail` (an OpenAPI operation: summary, tags, security,
 * extra parameters, and request/response skeletons whose schemas are filled in here), and the error
 * catalogue (src/http/errors.ts) for every error response they declare. The schemas are turned into
 * OpenAPI 3.1 JSON Schema, titled ones into components, by src/docs/openapi-schema.ts.
 */

/** What the generator reads of an Elysia route (`app.routes`). */
export interface DocumentedRoute {
  method: string;
  path: string;
  hooks?: unknown;
}

interface RouteHooks {
  body?: unknown;
  query?: unknown;
  params?: unknown;
  headers?: unknown;
  response?: unknown;
  detail?: Json & { hide?: boolean };
}

export interface DocumentOptions {
  /** `{base_url}`, the server URL; operations are documented relative to it. */
  baseUrl: string;
  /** The route path prefix that `baseUrl` stands for (`/v2`). */
  prefix: string;
  version: string;
}

const OPENAPI_VERSION = "3.1.0";

/** The API is the operator's own service, not open source (an SPDX LicenseRef, as OpenAPI 3.1 allows). */
const LICENSE = { name: "Proprietary", identifier: "LicenseRef-Proprietary" };

const TAGS = [
  {
    name: "Authentication",
    description: `OAuth 2.0 client credentials: exchange the application's \`client_id\` and \`client_secret\` for a bearer token that lives ${TOKEN_LIFETIME_SECONDS} seconds.`,
  },
  { name: "Messages", description: "Send messages, and read every message of your account in one feed." },
  {
    name: "Webhooks",
    description:
      "Push: every event of the log posted to your endpoints, signed per Standard Webhooks, in order per contact, resumable from any cursor.",
  },
  { name: "Media", description: "Upload files to send as the header of a template." },
  { name: "Senders", description: "Your connected sender numbers and their approved templates." },
  { name: "Contacts", description: "Contacts, their 24-hour messaging window, and their messages." },
  { name: "Conversations", description: "One entry per contact, ordered by its last message." },
  { name: "Documentation", description: "Pages for people." },
];

const DESCRIPTION = `Send notifications to customers over WhatsApp and read their replies.

**Authentication.** Exchange your application's \`client_id\` and \`client_secret\` for an access token at
\`POST /oauth/token\` and send it as \`Authorization: Bearer <token>\`. Tokens live ${TOKEN_LIFETIME_SECONDS} seconds; each
endpoint needs the scope it names (\`messaging:send\` or \`messaging:read\`). OAuth client libraries can discover the
token endpoint from the issuer \`{base_url}\` (RFC 8414 metadata at \`${METADATA_PATH}\` of its host).

**Errors.** Every error has the envelope \`{"error": {"type", "code", "message", "param", "request_id", "doc_url"}}\`
(the token endpoint answers RFC 6749 errors instead). Branch on \`code\`; each response below lists the codes it can
carry. Besides those, any path answers 404 \`resource_missing\` when it does not exist, 405 \`method_not_allowed\`
(with \`Allow\`) for a method it does not take, and 413 \`request_too_large\` for a declared body over ${JSON_BODY_LIMIT / (1024 * 1024)} MB.

**Limits.** Per application: ${DEFAULT_LIMITS.read} read and ${DEFAULT_LIMITS.send} send requests per second (fixed one-second windows), plus a daily
send quota per channel; the token endpoint takes ${DEFAULT_LIMITS.token} per second per client. Every response carries \`Request-Id\`,
\`RateLimit-*\` (with \`RateLimit-Policy\`, e.g. \`${DEFAULT_LIMITS.send};w=1\`) and \`X-RateLimit-*\` (described once under
\`components/headers\` and listed on each operation's success and 429 answers; a 413, and a 503 whose limiter could not be
reached, carry none); a 429 carries \`Retry-After\`.
Each sender shows the quota's limit, today's use and when it resets (\`quota\` on \`GET /senders\`).

**Identifiers** are opaque, prefixed and case-sensitive (\`msg_\`, \`ctc_\`, \`snd_\`, \`tpl_\`, \`med_\`, \`req_\`, \`fd_\`).
Timestamps named \`created\` are Unix epoch seconds.`;

/** Both rate-limit header families (src/http/rate-limit.ts), each a component named without dashes. */
const RATE_LIMIT_HEADERS = [
  [
    "RateLimit-Policy",
    "The limit and its window in seconds, e.g. `3;w=1`: 3 requests per one-second window.",
    { type: "string", pattern: "^[0-9]+;w=1$" },
  ],
  ["RateLimit-Limit", "Requests allowed in the current one-second window."],
  ["RateLimit-Remaining", "Requests left in the current window."],
  ["RateLimit-Reset", "Seconds until the window resets."],
  ["X-RateLimit-Limit", "Same as `RateLimit-Limit`."],
  ["X-RateLimit-Remaining", "Same as `RateLimit-Remaining`."],
  ["X-RateLimit-Reset", "Unix epoch second at which the window resets."],
] as const satisfies readonly (readonly [string, string, Json?])[];

const COUNT_SCHEMA: Json = { type: "integer", minimum: 0 };

const componentOf = (header: string) => header.replaceAll("-", "");

const HEADERS: Record<string, Json> = {
  RequestId: {
    description: "This request's `req_` id; quote it to support. Equals `error.request_id`.",
    required: true,
    schema: { type: "string", pattern: "^req_[0-9A-Za-z]+$" },
  },
  ...Object.fromEntries(
    RATE_LIMIT_HEADERS.map(([name, description, schema]) => [
      componentOf(name),
      { description, schema: schema ?? COUNT_SCHEMA },
    ]),
  ),
  RetryAfter: {
    description: "Seconds to wait before retrying.",
    required: true,
    schema: { type: "integer", minimum: 1 },
  },
  WwwAuthenticate: {
    description: "The authentication challenge (RFC 6750 for bearer tokens, RFC 7617 on the token endpoint).",
    schema: { type: "string" },
  },
};

/** Codes whose answers carry `Retry-After` / `WWW-Authenticate`. */
const RETRY_AFTER_CODES: ReadonlySet<string> = new Set<ApiErrorCode>([
  "rate_limit_exceeded",
  "quota_exceeded",
  "service_unavailable",
  "idempotency_key_in_use",
]);
const CHALLENGE_CODES: ReadonlySet<string> = new Set<ApiErrorCode | OAuthErrorCode>([
  "unauthorized",
  "insufficient_scope",
  "invalid_client",
]);

const STATUS_TEXT: Record<string, string> = { "200": "OK", "201": "Created" };

/** `param` in the example error of a code, where one is typical. */
const EXAMPLE_PARAMS: Partial<Record<ApiErrorCode, string>> = {
  parameter_conflict: "template",
  parameter_missing: "sender",
  parameter_invalid: "to",
  parameter_unknown: "templat",
  template_not_found: "template.name",
  idempotency_key_reused: "Idempotency-Key",
  idempotency_key_in_use: "Idempotency-Key",
  unsupported_media_type: "file",
  file_too_large: "file",
  media_expired: "template.header.media",
  resource_missing: "contact",
  messaging_window_closed: "body",
  recipient_opted_out: "to",
};

const EXAMPLE_REQUEST_ID = "req_Q2w3E4r5T6y7U8i9O0p1A2";

/** When each event is posted (the `webhooks` entries), and what its `data` then shows. */
const EVENT_MOMENTS: Record<(typeof EVENT_TYPES)[number], string> = {
  "message.received":
    "A customer's message arrived and was stored; `data` is the inbound message (`status` null). Not sent for system notices.",
  "message.sent": "The provider accepted an outbound message for delivery; `data.status` is `sent`.",
  "message.delivered": "An outbound message reached the customer's phone; `data.status` is `delivered`.",
  "message.read": "The customer read an outbound message; `data.status` is `read`.",
  "message.failed": "An outbound message failed; `data.failure` says why and whether sending again may help.",
  "message.canceled":
    "A scheduled or accepted message was canceled (POST /messages/{id}/cancel) before it was handed to the provider; `data.status` is `canceled`, and it is never sent.",
};

const EXAMPLE_EVENT_IDS = [
  "evt_4Gh6Jk8Lm0Np2Qr4St6Uv8",
  "evt_5Hj7Kl9Mn1Pq3Rs5Tu7Vw9",
  "evt_6Jk8Lm0Np2Qr4St6Uv8Wx0",
  "evt_7Kl9Mn1Pq3Rs5Tu7Vw9Xy1",
  "evt_8Lm0Np2Qr4St6Uv8Wx0Yz2",
  "evt_9Mn1Pq3Rs5Tu7Vw9Xy1Za3",
];

/** An example delivery of each event type (valid against the Event schema; the test checks it). */
function exampleEvent(type: (typeof EVENT_TYPES)[number], index: number): Json {
  const contact = { object: "contact", id: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY", phone: "+4915123456789" };
  const created = 1767259800 + index * 60;
  const data =
    type === "message.received"
      ? {
          object: "message",
          id: "msg_8Tb4Vc6Xd8Zf0Hg2Jk4Lm6",
          direction: "inbound",
          type: "text",
          preview: "Hi, when does my parcel arrive?",
          text: "Hi, when does my parcel arrive?",
          media: null,
          status: null,
          failure: null,
          client_reference: null,
          created,
          contact,
        }
      : {
          object: "message",
          id: "msg_3Rt5Yu7Io9Pa1Sd3Fg5Hj7",
          direction: "outbound",
          type: "template",
          preview: "Hi Ana, your order A-1 has shipped.",
          text: "Hi Ana, your order A-1 has shipped.",
          media: null,
          status: type.slice("message.".length),
          failure:
            type === "message.failed"
              ? {
                  code: "recipient_invalid",
                  message: "The number is not on WhatsApp.",
                  retryable: false,
                }
              : null,
          client_reference: "order-A-1",
          created: 1767259800,
          contact,
        };
  return { object: "event", id: EXAMPLE_EVENT_IDS[index], type, created, data };
}

/** The Standard Webhooks headers of every delivery, as `#/components/parameters`. */
const WEBHOOK_PARAMETERS: Record<string, Json> = {
  WebhookId: {
    name: "webhook-id",
    in: "header",
    required: true,
    description:
      "The event's `evt_` id, the same on every attempt and replay of it: de-duplicate by it (keep the ids you handled for at least 3 days). A test event sent from the panel has an `evt_test_` id and made-up data.",
    schema: { type: "string", pattern: "^evt_[0-9A-Za-z_]+$" },
  },
  WebhookTimestamp: {
    name: "webhook-timestamp",
    in: "header",
    required: true,
    description:
      "When this attempt was signed, in Unix seconds. Refuse a delivery whose timestamp is more than 5 minutes from your clock (a replayed request).",
    schema: { type: "string", pattern: "^[0-9]+$" },
  },
  WebhookSignature: {
    name: "webhook-signature",
    in: "header",
    required: true,
    description:
      "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the base64-decoded part of the endpoint's `secret` after `whsec_`. While a secret is being rotated (24 hours) two signatures come, separated by a space: accept the delivery when either matches.",
    schema: { type: "string", pattern: "^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)*$" },
  },
};

const WEBHOOK_DELIVERY = `Posted to each enabled webhook endpoint subscribed to this type, signed per Standard Webhooks
(standardwebhooks.com) with the endpoint's \`secret\`. Verify the signature over the raw body before you parse it (the
SDK's \`client.webhooks.verify\`, or any Standard Webhooks library); see docs/webhooks.md for a receiver step by step.

- **Acknowledge** with any 2xx within 10 seconds; do the work afterwards. The answer's body is ignored.
- **Retries.** Anything else (another status, a timeout, a refused connection) is retried with exponential backoff and
  jitter: 5 seconds, doubling up to 1 hour between attempts, for 3 days; then the endpoint is disabled
  (\`disabled_reason: "failing"\`). A 410 disables it at once (\`"gone"\`). Enabled again (\`PATCH /webhook_endpoints/{endpoint_id}\`),
  it resumes where it stopped: nothing is lost.
- **Order.** Events of one contact come one at a time, in order: the next is posted only after the previous one was
  acknowledged. Different contacts are posted in parallel.
- **At least once.** An event may come more than once (a lost acknowledgement, a replay): de-duplicate by \`webhook-id\`.
- **Catching up.** An endpoint's \`delivery.cursor\` is an \`evc_\` cursor of \`GET /events\`: read what is pending there,
  or \`POST /webhook_endpoints/{endpoint_id}/replay\` to have it posted again.`;

/** OpenAPI 3.1 `webhooks`: one entry per event type, what your receiver is posted. */
function buildWebhooks(schemas: Components): Json {
  const event = schemas.toJson(EventSchema);
  const parameters = Object.keys(WEBHOOK_PARAMETERS).map((name) => ({
    $ref: `#/components/parameters/${name}`,
  }));
  return Object.fromEntries(
    EVENT_TYPES.map((type, index) => [
      type,
      {
        post: {
          operationId: `${type.replace(/\.(\w)/, (_, c: string) => c.toUpperCase())}Webhook`,
          summary: `\`${type}\` event`,
          description: `${EVENT_MOMENTS[type]}\n\n${WEBHOOK_DELIVERY}`,
          tags: ["Webhooks"],
          // Your receiver authenticates the delivery by its signature, not by a credential of ours.
          security: [],
          parameters,
          requestBody: {
            required: true,
            description: `The \`${type}\` event, as JSON (\`content-type: application/json\`); the bytes the signature covers.`,
            content: {
              "application/json": {
                schema: event,
                examples: { [type]: { summary: `A \`${type}\` event`, value: exampleEvent(type, index) } },
              },
            },
          },
          responses: {
            "2XX": {
              description:
                "Acknowledged: this event is done for this endpoint, and the next one of the contact is posted.",
            },
            "410": {
              description:
                'Gone: the endpoint is disabled at once (`disabled_reason: "gone"`); nothing more is posted.',
            },
            default: {
              description:
                "Not acknowledged (as is a timeout after 10 seconds or a failed connection): retried with backoff, 5 seconds doubling to 1 hour, for 3 days.",
            },
          },
        },
      },
    ]),
  );
}

export function buildOpenApiDocument(routes: readonly DocumentedRoute[], options: DocumentOptions): Json {
  const schemas = new Components();
  const paths: Record<string, Json> = {};
  const operationIds = new Set<string>();

  for (const route of routes) {
    const hooks = (route.hooks ?? {}) as RouteHooks;
    if (!route.path.startsWith(`${options.prefix}/`) || hooks.detail?.hide) continue;
    const method = route.method.toLowerCase();
    if (!["get", "post", "put", "patch", "delete"].includes(method)) continue;
    const path = route.path.slice(options.prefix.length).replace(/:([^/]+)/g, "{$1}");
    const operation = buildOperation(route, hooks, schemas, options);
    const operationId = operation.operationId as string;
    if (operationIds.has(operationId)) throw new Error(`duplicate operationId ${operationId}`);
    operationIds.add(operationId);
    paths[path] = { ...paths[path], [method]: operation };
  }
  const webhooks = buildWebhooks(schemas);
  // The envelopes are referenced by every error response; make sure they are there.
  schemas.add(ErrorResponse);
  schemas.add(OAuthErrorResponse);

  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: "Messaging Notification API",
      version: options.version,
      description: DESCRIPTION,
      contact: { name: "API support", url: `${options.baseUrl}/docs` },
      license: LICENSE,
    },
    servers: [{ url: options.baseUrl, description: "This service." }],
    externalDocs: { description: "Error codes", url: `${options.baseUrl}/docs` },
    tags: TAGS,
    paths,
    webhooks,
    components: {
      schemas: schemas.sorted(),
      parameters: WEBHOOK_PARAMETERS,
      headers: HEADERS,
      // One scheme, so the reference's Authorize dialog offers one way in: the client credentials
      // flow, whose token is sent as `Authorization: Bearer <token>`.
      securitySchemes: {
        oauth2: {
          type: "oauth2",
          description:
            "OAuth 2.0 client credentials: your application's `client_id` and `client_secret` (HTTP Basic or form fields) at `POST /oauth/token` give an access token (a JWT), sent as `Authorization: Bearer <token>`. In this reference: Authorize, enter both, and every request you try carries the token.",
          flows: {
            clientCredentials: {
              tokenUrl: `${options.baseUrl}/oauth/token`,
              scopes: {
                "messaging:send": "Send messages and upload media.",
                "messaging:read": "Read senders, templates, contacts, conversations, history and the feed.",
              },
            },
          },
        },
      },
    },
  };
}

function buildOperation(
  route: DocumentedRoute,
  hooks: RouteHooks,
  schemas: Components,
  options: DocumentOptions,
): Json {
  const {
    hide: _hide,
    parameters: extraParameters,
    requestBody: bodySkeleton,
    responses: responseSkeletons,
    // The pipeline's (src/http/route-policy.ts); the document says it in words.
    [POLICY_DETAIL_KEY]: _policy,
    ...detail
  } = hooks.detail ?? {};
  if (typeof detail.operationId !== "string") {
    throw new Error(`${route.method} ${route.path} has no detail.operationId`);
  }
  const operation: Json = { ...detail };
  const scope = detail["x-scope"];
  if (typeof scope === "string") {
    operation.description = [detail.description, `Requires the scope \`${scope}\`.`]
      .filter(Boolean)
      .join("\n\n");
  }

  const parameters = [
    ...parametersOf(hooks.params, "path", schemas),
    ...parametersOf(hooks.query, "query", schemas),
    ...parametersOf(hooks.headers, "header", schemas),
    ...((extraParameters as Json[] | undefined) ?? []),
  ];
  if (!hooks.params && route.path.includes(":")) {
    throw new Error(`${route.method} ${route.path} has path parameters but no params schema`);
  }
  if (parameters.length > 0) operation.parameters = parameters;

  const method = route.method.toUpperCase();
  if (hooks.body && method !== "GET" && method !== "HEAD") {
    operation.requestBody = requestBodyOf(hooks, (bodySkeleton ?? {}) as Json, schemas);
  }
  operation.responses = responsesOf(hooks.response, (responseSkeletons ?? {}) as Json, schemas, options);
  return operation;
}

function parametersOf(schema: unknown, where: "path" | "query" | "header", schemas: Components): Json[] {
  if (!schema) return [];
  const object = schemas.inline(schema);
  const properties = (object.properties ?? {}) as Record<string, Json>;
  const required = new Set((object.required as string[] | undefined) ?? []);
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: where,
      required: where === "path" || required.has(name),
      ...(typeof description === "string" && { description }),
      schema: rest,
    };
  });
}

/**
 * The route's `detail.requestBody.content` names the media types it reads (JSON when it names none,
 * as for answers); the body schema fills each, or `detail.requestBody.schema`, a documented variant of
 * it (e.g. withExclusivePairs) where the validating schema cannot say everything a client should know.
 */
function requestBodyOf(hooks: RouteHooks, skeleton: Json, schemas: Components): Json {
  const { schema: documented, ...rest } = skeleton;
  const content = (rest.content as Record<string, Json> | undefined) ?? { "application/json": {} };
  const schema = schemas.toJson(documented ?? hooks.body);
  return {
    ...rest,
    required: rest.required ?? true,
    content: Object.fromEntries(Object.entries(content).map(([type, media]) => [type, { schema, ...media }])),
  };
}

function responseMap(response: unknown): [string, unknown][] {
  if (!isObject(response)) return [];
  const keys = Object.keys(response);
  // A single schema (not keyed by status) is the 200 answer.
  if (keys.length === 0 || !keys.every((key) => /^\d{3}$/.test(key))) return [["200", response]];
  return Object.entries(response).sort(([a], [b]) => Number(a) - Number(b));
}

function responsesOf(
  response: unknown,
  skeletons: Json,
  schemas: Components,
  options: DocumentOptions,
): Json {
  const responses: Json = {};
  for (const [status, raw] of responseMap(response)) {
    const errors = isObject(raw) ? (raw[ERROR_CODES_KEY] as DocumentedErrors | undefined) : undefined;
    if (errors) {
      responses[status] = errorResponse(Number(status), errors, options);
      continue;
    }
    const skeleton = (skeletons[status] ?? {}) as Json;
    const schema = schemas.toJson(raw);
    const content = (skeleton.content as Record<string, Json> | undefined) ?? { "application/json": {} };
    responses[status] = {
      ...skeleton,
      description: skeleton.description ?? schemas.describe(raw) ?? STATUS_TEXT[status] ?? status,
      headers: { ...standardHeaders(Number(status)), ...(skeleton.headers as Json | undefined) },
      content: Object.fromEntries(
        Object.entries(content).map(([type, media]) => [type, { schema, ...media }]),
      ),
    };
  }
  for (const status of Object.keys(skeletons)) {
    if (!(status in responses)) throw new Error(`detail.responses[${status}] has no response schema`);
  }
  return responses;
}

/**
 * The headers a response lists. The rate-limit headers are described once, in `components/headers`,
 * and listed (as references) on the answers a client paces itself by: success and 429. Every other
 * answer carries them too (the API description says so), but listing seven headers on each of an
 * operation's ten answers made one operation thousands of pixels tall in the reference.
 */
function standardHeaders(status: number): Json {
  const headers: Json = { "Request-Id": { $ref: "#/components/headers/RequestId" } };
  if (status < 400 || status === 429) {
    for (const [name] of RATE_LIMIT_HEADERS) {
      headers[name] = { $ref: `#/components/headers/${componentOf(name)}` };
    }
  }
  return headers;
}

function errorResponse(status: number, errors: DocumentedErrors, options: DocumentOptions): Json {
  const catalogue: Record<string, { meaning: string }> =
    errors.catalogue === "api" ? API_ERRORS : OAUTH_ERRORS;
  const describe = (code: string) => {
    const entry = catalogue[code];
    if (!entry) throw new Error(`unknown ${errors.catalogue} error code ${code}`);
    return entry.meaning;
  };
  const headers = standardHeaders(status);
  // A 503 (a dependency outage) always says when to retry.
  const retrying = status === 503 ? errors.codes : errors.codes.filter((code) => RETRY_AFTER_CODES.has(code));
  if (retrying.length > 0) {
    headers["Retry-After"] =
      retrying.length === errors.codes.length
        ? { $ref: "#/components/headers/RetryAfter" }
        : {
            ...HEADERS.RetryAfter,
            required: false,
            description: `Seconds to wait; sent with ${retrying.map((code) => `\`${code}\``).join(", ")}.`,
          };
  }
  if (errors.codes.some((code) => CHALLENGE_CODES.has(code))) {
    headers["WWW-Authenticate"] = { $ref: "#/components/headers/WwwAuthenticate" };
  }
  const examples = Object.fromEntries(
    errors.codes.map((code) => [code, { summary: code, value: exampleError(errors, code, options) }]),
  );
  const envelope = errors.catalogue === "api" ? "ErrorResponse" : "OAuthError";
  return {
    description: errors.codes.map((code) => `- \`${code}\`: ${describe(code)}`).join("\n"),
    headers,
    content: {
      "application/json": { schema: { $ref: `#/components/schemas/${envelope}` }, examples },
    },
  };
}

function exampleError(errors: DocumentedErrors, code: string, options: DocumentOptions): Json {
  if (errors.catalogue === "oauth") {
    const entry = OAUTH_ERRORS[code as keyof typeof OAUTH_ERRORS];
    return { error: code, error_description: entry.meaning, request_id: EXAMPLE_REQUEST_ID };
  }
  const entry = API_ERRORS[code as ApiErrorCode];
  return {
    error: {
      type: entry.type,
      code,
      message: entry.meaning,
      param: EXAMPLE_PARAMS[code as ApiErrorCode] ?? null,
      request_id: EXAMPLE_REQUEST_ID,
      doc_url: `${options.baseUrl}/docs#${code}`,
      ...(code === "messaging_window_closed" && {
        messaging_state: {
          sendable: false,
          within_window: false,
          window_expires_at: null,
          requires_template: true,
          opted_out: false,
        },
      }),
    },
  };
}
