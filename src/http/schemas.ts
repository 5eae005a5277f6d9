import {
  type SchemaOptions,
  type TLiteral,
  type TObject,
  type TProperties,
  type TSchema,
  Type,
} from "@sinclair/typebox";
import { t } from "elysia";
import { API_ERRORS, type ApiErrorCode, ERROR_TYPES, OAUTH_ERRORS, type OAuthErrorCode } from "./errors.ts";

/**
 * A union of the string literals of a list kept in one place (error types, failure codes, event
 * types). Typed as a tuple: Elysia's handler typing does not take a union of a plain array.
 */
export function literalUnion<T extends string>(values: readonly T[], options?: SchemaOptions) {
  return t.Union(values.map((value) => t.Literal(value)) as [TLiteral<T>, ...TLiteral<T>[]], options);
}

/** A contact's 24-hour window and opt-out (contacts, and the `messaging_window_closed` error's detail). */
export const messagingExample = {
  sendable: true,
  within_window: true,
  window_expires_at: "2026-01-02T09:30:00Z",
  requires_template: false,
  opted_out: false,
};

export const MessagingStateSchema = t.Object(
  {
    sendable: t.Boolean({
      description:
        "Free text may be sent now: the window is open, a sender is active and the customer has not opted out.",
    }),
    within_window: t.Boolean({ description: "The customer wrote within the last 24 hours." }),
    window_expires_at: t.Nullable(
      t.String({
        format: "date-time",
        description: "When the window closes (ISO 8601 UTC); null when closed.",
      }),
    ),
    requires_template: t.Boolean({
      description: "Only an approved template may be sent now (nothing at all while `opted_out`).",
    }),
    opted_out: t.Boolean({
      description:
        "The customer opted out (answered STOP or a like word, the provider reported 131050, or you called `opt_out`): nothing, not even a template, is sent to them until they opt back in.",
    }),
  },
  {
    title: "MessagingState",
    description: "The contact's 24-hour messaging window and opt-out, as of this request.",
    examples: [messagingExample],
  },
);

/**
 * SPEC §2 list envelope around `item`; `extra` adds members (the feed's `next_cursor`). A titled item
 * (`Message`) names the list `MessageList` in the OpenAPI document.
 */
export function listOf<T extends TSchema, E extends TProperties = Record<never, never>>(
  item: T,
  description: string,
  extra?: E,
) {
  return t.Object(
    {
      object: t.Literal("list"),
      url: t.String({ description: "The request path." }),
      has_more: t.Boolean({ description: "Whether more items exist beyond this page." }),
      data: t.Array(item),
      ...(extra ?? ({} as E)),
    },
    { description, ...(typeof item.title === "string" && { title: `${item.title}List` }) },
  );
}

/** A list read from a cursor (the feed, the event log): SPEC §2's envelope with `next_cursor`. */
export function cursorListOf<T extends TSchema>(item: T, description: string) {
  return listOf(item, description, {
    next_cursor: t.String({
      description: "Pass as `since` in the next call; present on every page, even an empty one.",
    }),
  });
}

/**
 * The OpenAPI form of an object whose fields come in exclusive pairs ("`to` or `contact`", "`template` or
 * `body`"): the same object (its own field schemas, title and examples), plus for each pair a `oneOf` of
 * "first given, second absent" and the reverse. An absent field is the boolean schema `false`, which
 * generated clients type as `never`, so they refuse both fields, or neither, at compile time.
 *
 * Only the document uses it: the request itself is validated by `object`, and the service checks the
 * pairs so that each mistake gets its own error code and message.
 */
export function withExclusivePairs<T extends TObject>(
  object: T,
  pairs: readonly (readonly [keyof T["properties"] & string, keyof T["properties"] & string])[],
): TSchema {
  // JSON keeps what the document shows and drops TypeBox's symbol-keyed Optional marks.
  const fields = JSON.parse(JSON.stringify(object.properties)) as Record<string, unknown>;
  const given = (field: string, absent: string) => ({
    type: "object",
    required: [field],
    properties: { [field]: fields[field], [absent]: false },
  });
  return t.Unsafe({
    ...JSON.parse(JSON.stringify(object)),
    allOf: pairs.map(([a, b]) => ({ oneOf: [given(a, b), given(b, a)] })),
  });
}

/** The error envelope; the pipeline renders it (src/http/errors.ts apiErrorBody). */
export const ErrorResponse = t.Object(
  {
    error: t.Object(
      {
        type: literalUnion(ERROR_TYPES, { description: "The error's family." }),
        code: t.String({
          description:
            "Machine code to branch on; each response lists the codes it can carry, and `doc_url` explains them.",
        }),
        message: t.String({ description: "For people; may change, do not parse." }),
        param: t.Nullable(
          t.String({ description: "The offending parameter, dotted (`template.name`), or null." }),
        ),
        request_id: t.String({ description: "`req_` id; equals the `Request-Id` header." }),
        doc_url: t.String({ description: "`{base_url}/docs#<code>`." }),
        messaging_state: t.Optional(MessagingStateSchema),
      },
      { additionalProperties: true },
    ),
  },
  {
    title: "ErrorResponse",
    description: "Every API error. `messaging_state` is present only with `messaging_window_closed`.",
  },
);

/** RFC 6749 §5.2 error of POST /oauth/token (SPEC §7 "Token endpoint error shape"). */
export const OAuthErrorResponse = t.Object(
  {
    error: t.String({ description: "RFC 6749 error code, e.g. `invalid_client`." }),
    error_description: t.String({ description: "For people." }),
    request_id: t.String({ description: "`req_` id; equals the `Request-Id` header." }),
  },
  { title: "OAuthError", description: "An error of the token endpoint (RFC 6749 §5.2)." },
);

/**
 * Where an error response's codes are recorded for the OpenAPI document (src/docs/openapi.ts), which
 * turns it into a `$ref` to the catalogue's envelope, a description and one example per code.
 */
export const ERROR_CODES_KEY = "x-error-codes";

export interface DocumentedErrors {
  catalogue: "api" | "oauth";
  codes: string[];
}

type StatusOf<C extends ApiErrorCode> = (typeof API_ERRORS)[C]["status"];
type ErrorResponses<C extends ApiErrorCode> = { [S in StatusOf<C>]: typeof ErrorResponse };

function errorsByStatus<S extends TObject>(
  envelope: S,
  catalogue: DocumentedErrors["catalogue"],
  entries: [code: string, status: number][],
): Record<number, S> {
  const byStatus = new Map<number, string[]>();
  for (const [code, status] of entries) {
    const codes = byStatus.get(status) ?? [];
    if (!codes.includes(code)) codes.push(code);
    byStatus.set(status, codes);
  }
  const responses: Record<number, S> = {};
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const documented: DocumentedErrors = { catalogue, codes };
    // The same properties as the envelope (so Elysia's types see the envelope), marked for the document.
    responses[status] = Type.Object(envelope.properties, { [ERROR_CODES_KEY]: documented }) as never;
  }
  return responses;
}

/** Error responses for exactly these catalogue codes, one entry per HTTP status. */
export function errorResponses<C extends ApiErrorCode>(...codes: C[]): ErrorResponses<C> {
  return errorsByStatus(
    ErrorResponse,
    "api",
    codes.map((code) => [code, API_ERRORS[code].status]),
  ) as ErrorResponses<C>;
}

type StandardCode =
  | "unauthorized"
  | "insufficient_scope"
  | "rate_limit_exceeded"
  | "internal_error"
  | "service_unavailable";

/**
 * The errors every bearer-token endpoint can answer (missing or bad token, missing scope, rate limit,
 * our own failures, Postgres or Redis unreachable) plus the route's own `codes`.
 */
export function standardErrors<C extends ApiErrorCode = never>(
  ...codes: C[]
): ErrorResponses<C | StandardCode> {
  return errorResponses<C | StandardCode>(
    "unauthorized",
    "insufficient_scope",
    "rate_limit_exceeded",
    "internal_error",
    "service_unavailable",
    ...codes,
  );
}

/**
 * The token endpoint's errors, in its own shape. The pipeline keeps a 413 body-too-large and a 503
 * dependency outage at their status, spoken as `invalid_request` and `server_error`.
 */
export function tokenErrors(): Record<400 | 401 | 413 | 429 | 500 | 503, typeof OAuthErrorResponse> {
  const entries: [OAuthErrorCode, number][] = Object.entries(OAUTH_ERRORS).map(([code, e]) => [
    code as OAuthErrorCode,
    e.status,
  ]);
  entries.push(["invalid_request", 413], ["server_error", 503]);
  return errorsByStatus(OAuthErrorResponse, "oauth", entries) as Record<
    400 | 401 | 413 | 429 | 500 | 503,
    typeof OAuthErrorResponse
  >;
}
