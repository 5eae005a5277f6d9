/**
 * Every code a message's `failure.code` (and its `retrying.last_error.code`) can carry, in one
 * catalogue, beside the table that maps the provider's errors to them: `{base_url}/docs` (one
 * `#failure-<code>` anchor each) and the OpenAPI enum of `MessageFailure.code` both read it. The
 * mapping's codes are keys of the catalogue, so a code cannot be produced without being documented.
 *
 * `origin` says who decides it: `provider` (the provider's answer, or a failed status it reports),
 * `gateway` (this service, before any provider call: the checks at the claim, a deactivated sender),
 * or `both`. `retryable` is the failure's `retryable` flag: whether sending the same message again
 * may succeed.
 */
interface FailureDefinition {
  origin: "provider" | "gateway" | "both";
  retryable: boolean;
  /** What happened. */
  meaning: string;
  /** What the integrator should do. */
  action: string;
}

export const MESSAGE_FAILURES = {
  provider_rate_limited: {
    origin: "provider",
    retryable: true,
    meaning:
      "WhatsApp throttled the send: the sender's throughput, too many messages to one customer in a short time, the spam rate limit, or the app's call rate. A throttled send is retried with backoff (capped at a minute) and never fails for it: you normally see this code only in `retrying.last_error`. A message fails with it only when WhatsApp reports the failure later, in a status.",
    action:
      "Nothing while it is retried. If it keeps happening, send more slowly to that customer, spread campaigns over time, or ask Meta for a higher messaging tier. A failed message may be sent again later as a new message.",
  },
  provider_unavailable: {
    origin: "provider",
    retryable: true,
    meaning:
      "WhatsApp had a temporary fault (an unknown or internal error, a 5xx answer), or did not answer in time, or could not be reached. The send is retried with exponential backoff, 10 attempts in all, before the message fails with this code.",
    action:
      "Nothing while it is retried (`retrying` on the message says when the next attempt is due). Once it failed, send it again as a new message (a new `Idempotency-Key`) when WhatsApp is back.",
  },
  provider_error: {
    origin: "provider",
    retryable: false,
    meaning:
      "WhatsApp refused the send with an error this service does not classify; `message` carries WhatsApp's own text and error code.",
    action:
      "Read `message` and look the WhatsApp error code up in Meta's Cloud API error reference. Quote the message id when you contact support.",
  },
  provider_auth_failed: {
    origin: "provider",
    retryable: false,
    meaning:
      "The sender's access token was refused by WhatsApp (expired or revoked, error 190), or the token stored for the sender cannot be decrypted by this service. Nothing was sent.",
    action:
      "Have an operator register a valid access token for the sender, then send the message again. Every message of that sender fails the same way until then.",
  },
  recipient_invalid: {
    origin: "provider",
    retryable: false,
    meaning:
      "The phone number cannot receive WhatsApp messages: it is not a WhatsApp user, or not a registered account (WhatsApp 131026, 133010).",
    action:
      "Check the number with the customer, or reach them another way. Sending to this number again fails the same way.",
  },
  recipient_opted_out: {
    origin: "both",
    retryable: false,
    meaning:
      "The customer does not want messages: WhatsApp refused the send because they stopped marketing messages from this business (131050), or they opted out (STOP, or by hand) after the message was accepted and before it was handed over. Either way the contact is now opted out (`messaging.opted_out`) and nothing was sent.",
    action:
      "Do not message them until they opt back in: they answer START, or you call POST /v2/contacts/{id}/opt_in with their consent.",
  },
  reengagement_required: {
    origin: "provider",
    retryable: false,
    meaning:
      "WhatsApp refused free text because more than 24 hours passed since the customer's last message (131047): outside that window only an approved template may be sent.",
    action: "Send an approved template instead; a reply from the customer opens the window again.",
  },
  template_mismatch: {
    origin: "provider",
    retryable: false,
    meaning:
      "WhatsApp refused the template's values: the number or format of the parameters does not match the approved template, the translated text is too long, or it breaks the template format policy (132000, 132005, 132007, 132012).",
    action:
      "Compare your `template.variables`, `header` and `buttons` with the template's `variables` (GET /v2/senders/{sender_id}/templates); the template may have changed at Meta since it was synced.",
  },
  template_not_found: {
    origin: "provider",
    retryable: false,
    meaning:
      "WhatsApp has no approved template of that name in that language (132001): it was deleted, paused or rejected at Meta after this service last synced it.",
    action:
      "List the approved templates (GET /v2/senders/{sender_id}/templates) and send one of those; an operator can sync the sender's templates at once.",
  },
  parameter_invalid: {
    origin: "provider",
    retryable: false,
    meaning:
      "WhatsApp refused a value of the message: a parameter missing or not valid, or a template value with a line break, a tab or more than four spaces in a row (100, 131008, 131009, 132018).",
    action:
      "Correct the values (`message` says which WhatsApp found wrong; template values are single lines) and send again as a new message.",
  },
  sender_inactive: {
    origin: "gateway",
    retryable: false,
    meaning:
      "The sender was deactivated after the message was accepted and before it was handed over; nothing was sent.",
    action: "Send the message again from an active sender (GET /v2/senders).",
  },
  expired: {
    origin: "gateway",
    retryable: false,
    meaning:
      "The message could not be handed to WhatsApp within its `valid_for` (counted from acceptance, or from `send_at` when scheduled), so it was not sent late; nothing was sent.",
    action:
      "Send it again if it still matters, with a longer `valid_for`; a sender's `throughput` shows how long its backlog takes.",
  },
  messaging_window_closed: {
    origin: "gateway",
    retryable: false,
    meaning:
      "A scheduled free-text message could not go out at its `send_at`: the customer's 24-hour window had closed by then; nothing was sent.",
    action: "Send an approved template instead, or schedule free text only within the window.",
  },
} as const satisfies Record<string, FailureDefinition>;

export type MessageFailureCode = keyof typeof MESSAGE_FAILURES;

/** Every failure code, in catalogue order. */
export const MESSAGE_FAILURE_CODES = Object.keys(MESSAGE_FAILURES) as MessageFailureCode[];

/** The codes a provider error is normalized to (src/channel/provider.ts). */
export type ProviderErrorCode = {
  [C in MessageFailureCode]: (typeof MESSAGE_FAILURES)[C]["origin"] extends "gateway" ? never : C;
}[MessageFailureCode];

/** Why a failed outbound message failed, or why the attempt a message waits to retry failed. */
export interface MessageFailure {
  code: MessageFailureCode;
  message: string;
  retryable: boolean;
}

/**
 * WhatsApp Cloud API error codes, grouped by what the service does about them (the retry verdict
 * is the catalogue's).
 */
export const GRAPH_ERROR_CODES: readonly (readonly [
  graphCodes: readonly number[],
  code: ProviderErrorCode,
])[] = [
  [[4, 80007, 130429, 131048, 131056], "provider_rate_limited"],
  [[1, 2, 131000], "provider_unavailable"],
  [[131026, 133010], "recipient_invalid"],
  [[132000, 132005, 132007, 132012], "template_mismatch"],
  [[132001], "template_not_found"],
  [[131047], "reengagement_required"],
  // 131050: the user stopped marketing messages from this business; the one code that opts out.
  [[131050], "recipient_opted_out"],
  // 132018: a template parameter holds a line break, a tab or more than four spaces in a row.
  [[100, 131008, 131009, 132018], "parameter_invalid"],
  [[190], "provider_auth_failed"],
];

/**
 * What a provider failure without a known WhatsApp code becomes: a throttle (HTTP 429), a fault on
 * the provider's side (5xx, a timeout, no connection), anything else.
 */
export const PROVIDER_FALLBACK_CODES = {
  throttled: "provider_rate_limited",
  unavailable: "provider_unavailable",
  unknown: "provider_error",
} as const satisfies Record<string, ProviderErrorCode>;

/** Every code the provider mapping can produce: the table's and the fallbacks. */
export const PROVIDER_FAILURE_CODES: readonly ProviderErrorCode[] = [
  ...new Set([...GRAPH_ERROR_CODES.map(([, code]) => code), ...Object.values(PROVIDER_FALLBACK_CODES)]),
];

/** The WhatsApp error codes that map to `code` (none for the gateway's own codes). */
export function graphCodesOf(code: MessageFailureCode): number[] {
  return GRAPH_ERROR_CODES.flatMap(([graphCodes, mapped]) => (mapped === code ? [...graphCodes] : []));
}

/** The anchor of a failure code's entry on `{base_url}/docs` (API error codes have the bare code). */
export function failureDocAnchor(code: string): string {
  return `failure-${code}`;
}
