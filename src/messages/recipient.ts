import { CompiledQuery } from "kysely";
import { isBsuid, type RecipientAddress } from "../channel/identity.ts";
import { findContactByUserId } from "../contacts/identity.ts";
import { toE164 } from "../contacts/phone.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import type { SendMessageInput } from "./schemas.ts";

/**
 * A send's recipient: the contact it names, or the one its phone number or BSUID belongs to (if any
 * yet). Who a person is, merges included, is src/contacts/identity.ts's rule; this reads its result.
 */
export interface Recipient {
  /** Undefined for a phone number or BSUID no contact has yet: the contact is created with the message. */
  contactId: string | undefined;
  /** E.164; null when the contact has none (it is addressed by its BSUID, DESIGN §14). */
  phone: string | null;
  /** The BSUID of a new contact (a send to a BSUID nobody has yet); null otherwise. */
  userId: string | null;
  lastInboundAt: Date | null;
  optedOut: boolean;
}

/** `to` as an address: an E.164 phone number (any form toE164 reads) or a BSUID; else 400. */
export function addressOrRefuse(to: string | undefined): RecipientAddress {
  if (isBsuid(to)) return { userId: to };
  const phone = toE164(to ?? "");
  if (!phone) {
    throw new ApiError(
      "parameter_invalid",
      "to must be a phone number in E.164 form, like +4915123456789, or a WhatsApp business-scoped user id (BSUID), like DE.1502576394655843.",
      { param: "to" },
    );
  }
  return { phone };
}

/** A send to a phone number whose contact is not looked up (a template: the commit finds or creates it). */
export function unresolvedPhoneRecipient(phone: string): Recipient {
  return { contactId: undefined, phone, userId: null, lastInboundAt: null, optedOut: false };
}

// Hot lookups, written once (nothing is built per request; only the values are bound).
const CONTACT_BY_ID = CompiledQuery.raw(
  "SELECT id, phone, merged_into, last_inbound_at, opted_out_at FROM contacts WHERE tenant_id = $1 AND id = $2",
);
const CONTACT_BY_PHONE = CompiledQuery.raw(
  "SELECT id, last_inbound_at, opted_out_at FROM contacts WHERE tenant_id = $1 AND channel = 'whatsapp' AND phone = $2",
);

interface ContactRow {
  id: string;
  phone: string | null;
  merged_into: string | null;
  last_inbound_at: Date | null;
  opted_out_at: Date | null;
}

async function lookup<Row>(db: Db, query: CompiledQuery, values: unknown[]): Promise<Row | undefined> {
  return (await db.executeQuery<Row>({ ...query, parameters: values })).rows[0];
}

function known(contact: Pick<ContactRow, "id" | "phone" | "last_inbound_at" | "opted_out_at">): Recipient {
  return {
    contactId: contact.id,
    phone: contact.phone,
    userId: null,
    lastInboundAt: contact.last_inbound_at,
    optedOut: contact.opted_out_at !== null,
  };
}

/** `contact`: the contact by its id; a merged contact's id names its survivor (DESIGN §14). */
async function byContactId(db: Db, tenantId: string, contactId: string): Promise<Recipient> {
  let contact = isId(contactId, "ctc")
    ? await lookup<ContactRow>(db, CONTACT_BY_ID, [tenantId, contactId])
    : undefined;
  // Merges keep chains flat: the survivor is one hop away (as findLiveContact reads it).
  if (contact?.merged_into)
    contact = await lookup<ContactRow>(db, CONTACT_BY_ID, [tenantId, contact.merged_into]);
  if (!contact)
    throw new ApiError("resource_missing", `No such contact: ${contactId}.`, { param: "contact" });
  return known(contact);
}

/** `to` a BSUID: the contact that has (or had) it, or a new one known by it alone. */
async function byUserId(db: Db, tenantId: string, userId: string): Promise<Recipient> {
  const contact = await findContactByUserId(db, tenantId, userId);
  if (contact) return known(contact);
  return { contactId: undefined, phone: null, userId, lastInboundAt: null, optedOut: false };
}

/** `to` a phone number: its contact, if any yet. */
async function byPhone(db: Db, tenantId: string, phone: string): Promise<Recipient> {
  const contact = await lookup<Omit<ContactRow, "phone" | "merged_into">>(db, CONTACT_BY_PHONE, [
    tenantId,
    phone,
  ]);
  return contact ? known({ ...contact, phone }) : unresolvedPhoneRecipient(phone);
}

export async function resolveRecipient(
  db: Db,
  tenantId: string,
  input: SendMessageInput,
): Promise<Recipient> {
  if (input.contact !== undefined) return byContactId(db, tenantId, input.contact);
  const address = addressOrRefuse(input.to);
  return "userId" in address ? byUserId(db, tenantId, address.userId) : byPhone(db, tenantId, address.phone);
}
