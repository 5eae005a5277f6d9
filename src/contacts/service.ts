import { isBsuid } from "../channel/identity.ts";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { findContactByUserId, findLiveContact } from "./identity.ts";
import { type MessagingState, messagingState } from "./messaging-state.ts";
import type { OptOutChange } from "./opt-out.ts";
import { toE164 } from "./phone.ts";
import { type ContactRow, findContactByPhone, setOptOut, tenantHasActiveSender } from "./repository.ts";

export interface ContactWithState {
  contact: ContactRow;
  messaging: MessagingState;
}

interface ReadDeps {
  db: Db;
  clock: Clock;
}

/**
 * The live contact an id names: a merged contact's id names its survivor (DESIGN §14). Unknown and
 * another tenant's ids are both 404 (ids are case-sensitive).
 */
export async function requireContact(db: Db, tenantId: string, contactId: string): Promise<ContactRow> {
  const contact = await findLiveContact(db, tenantId, contactId);
  if (!contact) {
    throw new ApiError("resource_missing", `No such contact: ${contactId}.`, { param: "contact_id" });
  }
  return contact;
}

/** The window is computed now, not stored: it closes by time alone (SPEC §3). */
async function withMessagingState(deps: ReadDeps, contact: ContactRow): Promise<ContactWithState> {
  const hasActiveSender = await tenantHasActiveSender(deps.db, contact.tenant_id);
  return {
    contact,
    messaging: messagingState(
      contact.last_inbound_at,
      deps.clock.now(),
      hasActiveSender,
      contact.opted_out_at !== null,
    ),
  };
}

/**
 * POST /contacts/{id}/opt_out and /opt_in (DESIGN §13): set by hand, idempotently (an opted-out
 * contact keeps its first `opted_out_at`). Unknown and another tenant's ids are 404.
 */
export async function setContactOptOut(
  deps: ReadDeps,
  tenantId: string,
  contactId: string,
  change: OptOutChange,
): Promise<ContactWithState> {
  const live = await requireContact(deps.db, tenantId, contactId);
  const contact = await setOptOut(deps.db, tenantId, live.id, change, deps.clock.now());
  if (!contact) {
    throw new ApiError("resource_missing", `No such contact: ${contactId}.`, { param: "contact_id" });
  }
  return withMessagingState(deps, contact);
}

export async function getContact(
  deps: ReadDeps,
  tenantId: string,
  contactId: string,
): Promise<ContactWithState> {
  return withMessagingState(deps, await requireContact(deps.db, tenantId, contactId));
}

/** GET /contacts: by `phone` or by `user_id`, exactly one of them. */
export async function findContactBy(
  deps: ReadDeps,
  tenantId: string,
  query: { phone?: string; user_id?: string },
): Promise<ContactWithState> {
  if (query.phone !== undefined && query.user_id !== undefined) {
    throw new ApiError("parameter_conflict", "Give phone or user_id, not both.", { param: "user_id" });
  }
  if (query.user_id !== undefined) return getContactByUserId(deps, tenantId, query.user_id);
  if (query.phone !== undefined) return getContactByPhone(deps, tenantId, query.phone);
  throw new ApiError(
    "parameter_missing",
    "Give phone (an E.164 phone number) or user_id (a business-scoped user id, like DE.1502576394655843).",
    { param: "phone" },
  );
}

/** GET /contacts?user_id=: a current, former or parent BSUID. */
async function getContactByUserId(
  deps: ReadDeps,
  tenantId: string,
  userId: string,
): Promise<ContactWithState> {
  if (!isBsuid(userId)) {
    throw new ApiError(
      "parameter_invalid",
      "user_id must be a business-scoped user id: a country code, a dot and 1 to 128 letters or digits, like DE.1502576394655843 (a parent one: US.ENT.…).",
      { param: "user_id" },
    );
  }
  const contact = await findContactByUserId(deps.db, tenantId, userId);
  if (!contact) {
    throw new ApiError("resource_missing", `No contact with user_id ${userId}.`, { param: "user_id" });
  }
  return withMessagingState(deps, contact);
}

/** GET /contacts?phone=: any form toE164 understands ("+49 151 ...", "49151..."). */
async function getContactByPhone(deps: ReadDeps, tenantId: string, phone: string): Promise<ContactWithState> {
  const e164 = toE164(phone);
  if (!e164) {
    throw new ApiError(
      "parameter_invalid",
      "phone must be a phone number in E.164 form, like +4915123456789.",
      {
        param: "phone",
      },
    );
  }
  const contact = await findContactByPhone(deps.db, tenantId, e164);
  if (!contact) throw new ApiError("resource_missing", `No contact with phone ${e164}.`, { param: "phone" });
  return withMessagingState(deps, contact);
}
