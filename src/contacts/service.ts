import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { type MessagingState, messagingState } from "./messaging-state.ts";
import type { OptOutChange } from "./opt-out.ts";
import { toE164 } from "./phone.ts";
import {
  type ContactRow,
  findContact,
  findContactByPhone,
  setOptOut,
  tenantHasActiveSender,
} from "./repository.ts";

export interface ContactWithState {
  contact: ContactRow;
  messaging: MessagingState;
}

interface ReadDeps {
  db: Db;
  clock: Clock;
}

/** Unknown and another tenant's ids are both 404 (ids are case-sensitive). */
export async function requireContact(db: Db, tenantId: string, contactId: string): Promise<ContactRow> {
  const contact = await findContact(db, tenantId, contactId);
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
  const contact = await setOptOut(deps.db, tenantId, contactId, change, deps.clock.now());
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

/** GET /contacts?phone=: any form toE164 understands ("+49 151 ...", "49151..."). */
export async function getContactByPhone(
  deps: ReadDeps,
  tenantId: string,
  phone: string,
): Promise<ContactWithState> {
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
