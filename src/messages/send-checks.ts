import type { MessagingState } from "../contacts/messaging-state.ts";
import { ApiError } from "../http/errors.ts";
import type { SendMessageInput } from "./schemas.ts";

/**
 * A send's refusals that need nothing but the request and the recipient's state: the request's own
 * shape, `send_at`'s range, a closed window, an opted-out customer (SPEC §4, DESIGN §13).
 */

/** WhatsApp's limit on a text message, in characters (code points, not UTF-16 units). */
export const TEXT_BODY_MAX = 4096;

export function windowClosed(state: MessagingState, message: string, param: string): ApiError {
  return new ApiError("messaging_window_closed", message, { param, extra: { messaging_state: state } });
}

export function optedOut(param: "to" | "contact"): ApiError {
  return new ApiError(
    "recipient_opted_out",
    "The customer opted out of messages from you (they answered STOP, or were opted out); nothing was sent.",
    { param },
  );
}

/**
 * DESIGN §14: an authentication template (a one-time code) goes to a phone number only; a contact
 * the provider knows by its BSUID alone cannot receive one.
 */
export function phoneRequired(param: "to" | "contact"): ApiError {
  return new ApiError(
    "recipient_phone_required",
    "Authentication templates can only be sent to a phone number, and this customer has not shared theirs (WhatsApp knows them by their business-scoped user id only); nothing was sent.",
    { param },
  );
}

/** Whether a template is of the authentication category (one-time codes), as the provider names it. */
export function isAuthenticationTemplate(template: { category: string }): boolean {
  return template.category.toUpperCase() === "AUTHENTICATION";
}

/** DESIGN §13: `send_at` from now + 60 s to now + 30 days, both ends inclusive. */
export const SEND_AT_MIN_AHEAD_S = 60;
export const SEND_AT_MAX_AHEAD_S = 30 * 24 * 3600;

/** When a scheduled send goes out, checked against `now`; undefined for a send that goes now. */
export function scheduledTime(input: SendMessageInput, now: Date): Date | undefined {
  if (input.send_at === undefined) return undefined;
  const nowS = Math.floor(now.getTime() / 1000);
  if (input.send_at < nowS + SEND_AT_MIN_AHEAD_S || input.send_at > nowS + SEND_AT_MAX_AHEAD_S) {
    throw new ApiError(
      "parameter_invalid",
      `send_at must be a Unix time from now + ${SEND_AT_MIN_AHEAD_S} seconds to now + 30 days (now is ${nowS}).`,
      { param: "send_at" },
    );
  }
  return new Date(input.send_at * 1000);
}

/** Checks that need nothing but the request itself, before any lookup. */
export function checkShape(input: SendMessageInput): void {
  if ((input.template === undefined) === (input.body === undefined)) {
    throw new ApiError(
      "parameter_conflict",
      input.template === undefined
        ? "Give either template (an approved template) or body (free text)."
        : "Give template or body, not both.",
      { param: input.template === undefined ? "template" : "body" },
    );
  }
  if (input.to !== undefined && input.contact !== undefined) {
    throw new ApiError(
      "parameter_conflict",
      "Give to (a phone number or BSUID) or contact (a ctc_ id), not both.",
      { param: "contact" },
    );
  }
  if (input.to === undefined && input.contact === undefined) {
    throw new ApiError(
      "parameter_missing",
      "Give the recipient: to (an E.164 phone number or a business-scoped user id) or contact (a ctc_ id).",
      {
        param: "to",
      },
    );
  }
  if (input.body !== undefined && [...input.body].length > TEXT_BODY_MAX) {
    throw new ApiError("parameter_invalid", `body may be at most ${TEXT_BODY_MAX} characters.`, {
      param: "body",
    });
  }
}
