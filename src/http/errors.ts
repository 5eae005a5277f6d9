import { capText } from "./paths.ts";

/**
 * Every error the service can answer, in one catalogue: the renderer, the /docs page and the
 * OpenAPI document all read it, so a code cannot exist in one and be missing from another.
 */

/** The error families (`error.type`). */
export const ERROR_TYPES = [
  "authentication_error",
  "permission_error",
  "invalid_request_error",
  "rate_limit_error",
  "api_error",
] as const;

export type ErrorType = (typeof ERROR_TYPES)[number];

interface ErrorDefinition {
  status: number;
  type: ErrorType;
  /** What it means. */
  meaning: string;
  /** What the integrator should do. */
  action: string;
}

export const API_ERRORS = {
  parameter_conflict: {
    status: 400,
    type: "invalid_request_error",
    meaning:
      "Parameters that exclude each other were given together, or neither of a required pair was given (for example both or neither of `template` and `body`).",
    action: "Send exactly one of the parameters named in `param`.",
  },
  parameter_missing: {
    status: 400,
    type: "invalid_request_error",
    meaning:
      "A required parameter is missing, or is ambiguous without it (for example `sender` when several senders are active).",
    action: "Add the parameter named in `param`.",
  },
  parameter_invalid: {
    status: 400,
    type: "invalid_request_error",
    meaning: "A parameter has the wrong type, format or range.",
    action: "Correct the parameter named in `param`; `message` says what is expected.",
  },
  parameter_unknown: {
    status: 400,
    type: "invalid_request_error",
    meaning: "The request carries a parameter this endpoint does not take (often a typo).",
    action: "Remove or rename the parameter named in `param`.",
  },
  invalid_json: {
    status: 400,
    type: "invalid_request_error",
    meaning: "The request body is not valid JSON.",
    action: "Send a well-formed JSON object with `Content-Type: application/json`.",
  },
  invalid_content_type: {
    status: 400,
    type: "invalid_request_error",
    meaning: "The request body's `Content-Type` is not one this endpoint accepts.",
    action: "Send JSON (`application/json`), or `multipart/form-data` for media uploads.",
  },
  request_too_large: {
    status: 413,
    type: "invalid_request_error",
    meaning: "The request body is larger than this endpoint accepts (1 MB for JSON).",
    action: "Send a smaller body; upload files through POST /media.",
  },
  template_not_found: {
    status: 400,
    type: "invalid_request_error",
    meaning: "No approved template with that name (and language) exists for the sender.",
    action: "List approved templates with GET /senders/{sender_id}/templates and use one of those names.",
  },
  idempotency_key_reused: {
    status: 400,
    type: "invalid_request_error",
    meaning: "This `Idempotency-Key` was already used with a different request body.",
    action: "Use a new key for a new request; repeat a request only with its original body.",
  },
  idempotency_key_in_use: {
    status: 409,
    type: "invalid_request_error",
    meaning: "A request with this `Idempotency-Key` is still being processed.",
    action: "Retry after the `Retry-After` seconds; you will receive the original result.",
  },
  unsupported_media_type: {
    status: 400,
    type: "invalid_request_error",
    meaning:
      "The uploaded file is not a supported PDF, JPEG, PNG, MP4 or 3GPP file (judged by its content, not its name).",
    action: "Upload a supported file type.",
  },
  file_too_large: {
    status: 400,
    type: "invalid_request_error",
    meaning: "The uploaded file exceeds the limit for its type (images 5 MB, video and documents 16 MB).",
    action: "Upload a smaller file.",
  },
  media_expired: {
    status: 400,
    type: "invalid_request_error",
    meaning: "The media handle is older than 30 days and can no longer be sent.",
    action: "Upload the file again with POST /media and use the new handle.",
  },
  unauthorized: {
    status: 401,
    type: "authentication_error",
    meaning: "The access token is missing, malformed, expired, or not signed by this service.",
    action: "Obtain a token from POST /oauth/token and send it as `Authorization: Bearer <token>`.",
  },
  insufficient_scope: {
    status: 403,
    type: "permission_error",
    meaning: "The access token is valid but lacks the scope this endpoint needs.",
    action:
      "Request a token with the scope named in the `WWW-Authenticate` header (the application must have it).",
  },
  resource_missing: {
    status: 404,
    type: "invalid_request_error",
    meaning: "The resource does not exist, or belongs to another tenant, or the path is unknown.",
    action: "Check the id (ids are case-sensitive) and the path.",
  },
  method_not_allowed: {
    status: 405,
    type: "invalid_request_error",
    meaning: "The path exists but does not take this HTTP method.",
    action: "Use one of the methods listed in the `Allow` header.",
  },
  messaging_window_closed: {
    status: 409,
    type: "invalid_request_error",
    meaning:
      "Free text can only be sent within 24 hours of the customer's last message, and only through an active sender.",
    action: "Send an approved template instead; `messaging_state` shows the contact's window.",
  },
  recipient_opted_out: {
    status: 409,
    type: "invalid_request_error",
    meaning:
      "The customer opted out (answered STOP or a like word, the provider reported 131050, or you opted them out); nothing is sent to them.",
    action:
      "Do not message them until they opt back in (they answer START, or you call POST /v2/contacts/{id}/opt_in with their consent).",
  },
  recipient_phone_required: {
    status: 409,
    type: "invalid_request_error",
    meaning:
      "An authentication template (a one-time code) was sent to a customer who has not shared their phone number: WhatsApp knows them only by their business-scoped user id (BSUID), and authentication templates go to phone numbers only. Nothing was sent.",
    action:
      "Reach the customer another way for the code, or send a template of another category; once they share their number (the Contact's `phone` is set), authentication templates reach them.",
  },
  message_not_cancelable: {
    status: 409,
    type: "invalid_request_error",
    meaning:
      "The message was already handed to the provider (or has failed), so it can no longer be canceled; the error's message names its status.",
    action: "Nothing to undo on our side; GET /v2/messages/{id} shows where it is.",
  },
  resource_limit_reached: {
    status: 409,
    type: "invalid_request_error",
    meaning: "Your account has as many of this resource as it may have (for example 16 webhook endpoints).",
    action: "Delete one you no longer use, or change an existing one instead of creating another.",
  },
  rate_limit_exceeded: {
    status: 429,
    type: "rate_limit_error",
    meaning: "Too many requests in the current one-second window.",
    action: "Wait `Retry-After` seconds and retry; watch the `RateLimit-*` headers to pace requests.",
  },
  quota_exceeded: {
    status: 429,
    type: "rate_limit_error",
    meaning: "The daily send quota for this channel is used up (it resets at 00:00 UTC).",
    action: "Retry after `Retry-After` seconds (the next UTC midnight), or ask for a higher quota.",
  },
  internal_error: {
    status: 500,
    type: "api_error",
    meaning: "Something went wrong on our side. Nothing you sent was at fault.",
    action: "Retry with the same `Idempotency-Key`; quote the `request_id` if you contact support.",
  },
  service_unavailable: {
    status: 503,
    type: "api_error",
    meaning: "A service we depend on is briefly unreachable.",
    action: "Retry after `Retry-After` seconds with the same `Idempotency-Key`.",
  },
} as const satisfies Record<string, ErrorDefinition>;

export type ApiErrorCode = keyof typeof API_ERRORS;

/** OAuth 2.0 token endpoint errors (RFC 6749 §5.2 shape, SPEC §7). */
export const OAUTH_ERRORS = {
  invalid_request: {
    status: 400,
    meaning:
      "The token request is malformed: a required field is missing or repeated, or the body is not JSON or form data.",
    action:
      "Send `grant_type`, `client_id` and `client_secret` as JSON, form fields, or HTTP Basic credentials.",
  },
  invalid_client: {
    status: 401,
    meaning: "The client_id is unknown, the client_secret is wrong, or the application was revoked.",
    action: "Check the credentials; a lost or revoked secret must be regenerated in the panel.",
  },
  unsupported_grant_type: {
    status: 400,
    meaning: "Only `grant_type=client_credentials` is supported.",
    action: "Send `grant_type=client_credentials`.",
  },
  invalid_scope: {
    status: 400,
    meaning: "The requested `scope` is unknown or not granted to this application.",
    action:
      "Request a subset of the application's scopes (`messaging:send`, `messaging:read`, `webhooks:manage`), or omit `scope`.",
  },
  rate_limit_exceeded: {
    status: 429,
    meaning: "Too many token requests for this client in the current second (limit 2 per second).",
    action: "Wait `Retry-After` seconds; reuse a token for its hour instead of fetching one per call.",
  },
  server_error: {
    status: 500,
    meaning: "The token could not be issued because of a problem on our side.",
    action: "Retry shortly.",
  },
} as const satisfies Record<string, { status: number; meaning: string; action: string }>;

export type OAuthErrorCode = keyof typeof OAUTH_ERRORS;

export interface ApiErrorOptions {
  param?: string | null;
  headers?: Record<string, string>;
  /** Extra members of the error object (e.g. `messaging_state`). */
  extra?: Record<string, unknown>;
  /** Overrides the catalogue's status (only where the catalogue allows several). */
  status?: number;
}

export class ApiError extends Error {
  readonly code: ApiErrorCode;
  readonly status: number;
  readonly type: ErrorType;
  readonly param: string | null;
  readonly headers: Record<string, string>;
  readonly extra: Record<string, unknown>;

  constructor(code: ApiErrorCode, message: string, options: ApiErrorOptions = {}) {
    super(message);
    this.code = code;
    this.status = options.status ?? API_ERRORS[code].status;
    this.type = API_ERRORS[code].type;
    this.param = options.param ?? null;
    this.headers = options.headers ?? {};
    this.extra = options.extra ?? {};
  }
}

export class OAuthError extends Error {
  readonly code: OAuthErrorCode;
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(
    code: OAuthErrorCode,
    description: string,
    headers: Record<string, string> = {},
    status?: number,
  ) {
    super(description);
    this.code = code;
    this.status = status ?? OAUTH_ERRORS[code].status;
    this.headers = headers;
  }
}

export function apiErrorBody(error: ApiError, requestId: string, baseUrl: string) {
  return {
    error: {
      type: error.type,
      code: error.code,
      message: error.message,
      param: error.param,
      request_id: requestId,
      doc_url: `${baseUrl}/docs#${error.code}`,
      ...error.extra,
    },
  };
}

export function oauthErrorBody(error: OAuthError, requestId: string) {
  return { error: error.code, error_description: error.message, request_id: requestId };
}

/** The answer to what failed on our side (logged by the caller): the same words wherever it is given. */
export function internalError(): ApiError {
  return new ApiError("internal_error", "An internal error occurred. It has been logged.");
}

/**
 * An unexpected error as the log takes it before its internal_error is answered: type, message and
 * stack, capped (a message may quote request data of any size).
 */
export function loggableError(error: unknown): { type: string; message: string; stack?: string } {
  if (!(error instanceof Error)) return { type: typeof error, message: capText(String(error)) };
  return { type: error.name, message: capText(error.message), stack: capText(error.stack ?? "", 4000) };
}

/** What any path that does not exist answers (the ops endpoints reuse it for theirs). */
export function unknownPathError(method: string, path: string): ApiError {
  return new ApiError("resource_missing", `Unknown path: ${method} ${path}.`);
}
