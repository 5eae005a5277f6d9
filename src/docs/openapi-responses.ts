import { API_ERRORS, type ApiErrorCode, OAUTH_ERRORS, type OAuthErrorCode } from "../http/errors.ts";
import { type DocumentedErrors, ERROR_CODES_KEY } from "../http/schemas.ts";
import { type Components, isObject, type Json } from "./openapi-schema.ts";

/**
 * An operation's `responses`: each declared answer's schema, its headers (`Request-Id`, the rate-limit
 * headers, described once in `components/headers`), and for error answers the codes of the error
 * catalogue (src/http/errors.ts) they can carry, each with its meaning and an example.
 */

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

export const HEADERS: Record<string, Json> = {
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

function responseMap(response: unknown): [string, unknown][] {
  if (!isObject(response)) return [];
  const keys = Object.keys(response);
  // A single schema (not keyed by status) is the 200 answer.
  if (keys.length === 0 || !keys.every((key) => /^\d{3}$/.test(key))) return [["200", response]];
  return Object.entries(response).sort(([a], [b]) => Number(a) - Number(b));
}

/** An operation's `responses`, from its response schemas and its `detail.responses` skeletons. */
export function responsesOf(response: unknown, skeletons: Json, schemas: Components, baseUrl: string): Json {
  const responses: Json = {};
  for (const [status, raw] of responseMap(response)) {
    const errors = isObject(raw) ? (raw[ERROR_CODES_KEY] as DocumentedErrors | undefined) : undefined;
    if (errors) {
      responses[status] = errorResponse(Number(status), errors, baseUrl);
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

function errorResponse(status: number, errors: DocumentedErrors, baseUrl: string): Json {
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
    errors.codes.map((code) => [code, { summary: code, value: exampleError(errors, code, baseUrl) }]),
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

function exampleError(errors: DocumentedErrors, code: string, baseUrl: string): Json {
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
      doc_url: `${baseUrl}/docs#${code}`,
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
