/**
 * Who a WhatsApp user is, as the provider names them since 2026 (DESIGN §14): a phone number when
 * the user shares it, and always a business-scoped user id (BSUID, `DE.1502576394655843`; a parent
 * BSUID shared by linked portfolios has `ENT.` after the country, `US.ENT.1181…`). The pattern has
 * this one home: the API's `to` and `?user_id=`, the reader and the simulator all test it here.
 */

/** A BSUID or parent BSUID: the country (ISO 3166 alpha-2), a dot, [ENT.], 1-128 alphanumerics. */
export const BSUID_PATTERN = "^[A-Z]{2}\\.(ENT\\.)?[A-Za-z0-9]{1,128}$";
const BSUID = new RegExp(BSUID_PATTERN);

/** Whether `text` is a BSUID or a parent BSUID. */
export function isBsuid(text: unknown): text is string {
  return typeof text === "string" && BSUID.test(text);
}

/** Whether `text` is a parent BSUID (`US.ENT.…`), the id linked business portfolios share. */
export function isParentBsuid(text: unknown): text is string {
  return isBsuid(text) && text.slice(2, 7) === ".ENT.";
}

/**
 * A user as one webhook names them. Every field may be missing: `phone` is null when the user
 * withholds it, `userId` when the provider sent none (traffic from before April 2026).
 */
export interface ProviderIdentity {
  /** E.164 with its leading '+' (the provider's digits, prefixed); null when not shared. */
  phone: string | null;
  /** The BSUID. */
  userId: string | null;
  /** The parent BSUID, when the business has them enabled. */
  parentUserId: string | null;
  /** The user's username: shown, never a key (users change it). */
  username: string | null;
  /** The user's profile name. */
  name: string | null;
}

/**
 * Where a send goes: a phone number when the contact has one, else its BSUID (or parent BSUID).
 * The adapter writes Graph's `to` for the one and `recipient` for the other.
 */
export type RecipientAddress = { phone: string } | { userId: string };
