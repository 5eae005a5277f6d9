import type { BatchResult, ErrorBody, MessagingState, OAuthErrorBody, SendBatchItem } from "./types.ts";

/** The `type` of a token endpoint error, which answers RFC 6749 errors (no `type` of its own). */
function oauthErrorType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "api_error";
  return "invalid_request_error";
}

/** An error answer of the API (SPEC §7 envelope), or of the token endpoint (RFC 6749 shape). */
export class ApiError extends Error {
  override readonly name = "ApiError";
  /** HTTP status. */
  readonly status: number;
  /** `authentication_error`, `permission_error`, `invalid_request_error`, `rate_limit_error`, `api_error`. */
  readonly type: string;
  /** The machine code to branch on (`quota_exceeded`, `messaging_window_closed`, `invalid_client`, ...). */
  readonly code: string;
  /** The offending parameter (`template.name`), or null. */
  readonly param: string | null;
  /** `req_` id of the failed request (the `Request-Id` header), for support. */
  readonly requestId: string | null;
  /** `{base_url}/docs#<code>`. */
  readonly docUrl: string | null;
  /** Only on `messaging_window_closed`: the contact's window. */
  readonly messagingState: MessagingState | null;
  /** Seconds from `Retry-After`, when the answer had one. */
  readonly retryAfter: number | null;
  /** On `quota_exceeded`: when the daily quota resets (from `Retry-After`). */
  readonly resetsAt: Date | null;
  /** The parsed answer body, or its text when it was not JSON. */
  readonly body: unknown;

  constructor(init: {
    status: number;
    type: string;
    code: string;
    message: string;
    param?: string | null;
    requestId?: string | null;
    docUrl?: string | null;
    messagingState?: MessagingState | null;
    retryAfter?: number | null;
    body?: unknown;
    receivedAt?: number;
  }) {
    super(init.message);
    this.status = init.status;
    this.type = init.type;
    this.code = init.code;
    this.param = init.param ?? null;
    this.requestId = init.requestId ?? null;
    this.docUrl = init.docUrl ?? null;
    this.messagingState = init.messagingState ?? null;
    this.retryAfter = init.retryAfter ?? null;
    this.resetsAt =
      init.code === "quota_exceeded" && this.retryAfter !== null
        ? new Date((init.receivedAt ?? Date.now()) + this.retryAfter * 1000)
        : null;
    this.body = init.body;
  }

  /**
   * The error of a redirect answer, which the SDK never follows (it would carry the client secret or
   * the bearer token to wherever it points): code `unexpected_redirect`, the 3xx status (0 for a
   * browser's opaque redirect) and the `Location` in the message.
   */
  static fromRedirect(response: Response): ApiError {
    const location = response.headers.get("location");
    const what =
      response.type === "opaqueredirect"
        ? "An opaque redirect"
        : `A ${response.status} redirect${location ? ` to ${location}` : ""}`;
    return new ApiError({
      status: response.status,
      type: "api_error",
      code: "unexpected_redirect",
      message: `${what} was not followed: the SDK never sends credentials after a redirect (check baseUrl)`,
      requestId: response.headers.get("request-id"),
    });
  }

  /** Builds the error of a non-2xx answer from its status, headers and body text. */
  static fromResponse(response: Response, text: string, receivedAt = Date.now()): ApiError {
    const retryAfter = parseRetryAfter(response.headers.get("retry-after"), receivedAt);
    const headerRequestId = response.headers.get("request-id");
    let body: unknown = text;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      // Not JSON (a proxy's page): the text is kept as the body.
    }
    const common = { status: response.status, retryAfter, body, receivedAt };
    const envelope = (body as { error?: unknown } | undefined)?.error;
    if (envelope && typeof envelope === "object") {
      const error = envelope as ErrorBody;
      return new ApiError({
        ...common,
        type: error.type,
        code: error.code,
        message: error.message,
        param: error.param,
        requestId: error.request_id ?? headerRequestId,
        docUrl: error.doc_url,
        messagingState: error.messaging_state ?? null,
      });
    }
    if (typeof envelope === "string") {
      const error = body as OAuthErrorBody;
      return new ApiError({
        ...common,
        type: oauthErrorType(response.status),
        code: error.error,
        message: error.error_description ?? error.error,
        requestId: error.request_id ?? headerRequestId,
      });
    }
    return new ApiError({
      ...common,
      type: "api_error",
      code: "unexpected_response",
      message: `HTTP ${response.status} without an error envelope`,
      requestId: headerRequestId,
    });
  }
}

/** `Retry-After` as seconds: an integer, or an HTTP date (RFC 9110 allows both). */
export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (value === null || value.trim() === "") return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - now) / 1000));
}

/**
 * `messages.sendBatch` stopped: a call for one chunk of the items failed after its retries (or was
 * refused whole, or the signal aborted). What was answered before is kept, and the items carry the
 * idempotency keys they were sent with, so the rest can be sent again without sending anything
 * twice: `client.messages.sendBatch(error.unanswered.map((i) => error.items[i]!))`.
 */
export class BatchSendError extends Error {
  override readonly name = "BatchSendError";
  /** The rows the API answered, in item order, each `index` in the array you passed. */
  readonly results: BatchResult[];
  /**
   * The indexes (in the array you passed) of the items without a row: the failed call's items, which
   * the API may have accepted before its answer was lost, and the items after them, never sent.
   */
  readonly unanswered: number[];
  /**
   * Every item as sent, each with its `idempotency_key` (yours, or the one the SDK made): sent again
   * within 24 hours, an item that was accepted is answered with its message (200), not sent again.
   */
  readonly items: SendBatchItem[];
  /** Why the call failed: an ApiError (`status`, `code`, ...), a network error, or the abort reason. */
  override readonly cause: unknown;

  constructor(init: {
    results: BatchResult[];
    unanswered: number[];
    items: SendBatchItem[];
    failed: { first: number; last: number };
    cause: unknown;
  }) {
    const { results, unanswered, items, failed, cause } = init;
    const reason = cause instanceof Error ? cause.message : String(cause);
    const calls = `the call for items ${range(failed.first, failed.last)}`;
    // A 4xx is the API refusing the call whole (nothing of it accepted); a 5xx or a lost connection
    // may come after some of its items were accepted.
    const what =
      cause instanceof ApiError && cause.status >= 400 && cause.status < 500
        ? `${calls} was refused whole (${cause.status} ${cause.code}): ${reason}`
        : `${calls} failed${cause instanceof ApiError ? ` (${cause.status} ${cause.code})` : ""}: ${reason}; ` +
          "its items without a row may have been accepted";
    const never = unanswered.filter((i) => i > failed.last);
    super(
      `sendBatch stopped with ${results.length} of ${items.length} items answered (error.results): ${what}` +
        (never.length > 0 ? `; items ${range(never[0]!, never.at(-1)!)} were never sent` : "") +
        ". Send the items of error.unanswered again with their keys (error.items): one already " +
        "accepted is answered with its message (200), nothing is sent twice.",
      { cause },
    );
    this.results = results;
    this.unanswered = unanswered;
    this.items = items;
    this.cause = cause;
  }
}

const range = (first: number, last: number) => (first === last ? `${first}` : `${first}-${last}`);
