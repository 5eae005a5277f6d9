import { CompiledQuery } from "kysely";
import { toE164 } from "../contacts/phone.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import type { SendMessageInput } from "./schemas.ts";

/** A send's recipient: the contact it names, or the one its phone number belongs to (if any yet). */
export interface Recipient {
  /** Undefined for a phone number we have never seen: the contact is created with the message. */
  contactId: string | undefined;
  phone: string;
  lastInboundAt: Date | null;
  optedOut: boolean;
}

export function phoneOrRefuse(to: string | undefined): string {
  const phone = toE164(to ?? "");
  if (!phone) {
    throw new ApiError("parameter_invalid", "to must be a phone number in E.164 form, like +4915123456789.", {
      param: "to",
    });
  }
  return phone;
}

// Hot lookups, written once (nothing is built per request; only the values are bound).
const CONTACT_BY_ID = CompiledQuery.raw(
  "SELECT id, phone, last_inbound_at, opted_out_at FROM contacts WHERE tenant_id = $1 AND id = $2",
);
const CONTACT_BY_PHONE = CompiledQuery.raw(
  "SELECT id, last_inbound_at, opted_out_at FROM contacts WHERE tenant_id = $1 AND channel = 'whatsapp' AND phone = $2",
);

interface ContactRow {
  id: string;
  phone: string;
  last_inbound_at: Date | null;
  opted_out_at: Date | null;
}

async function lookup<Row>(db: Db, query: CompiledQuery, values: unknown[]): Promise<Row | undefined> {
  return (await db.executeQuery<Row>({ ...query, parameters: values })).rows[0];
}

export async function resolveRecipient(
  db: Db,
  tenantId: string,
  input: SendMessageInput,
): Promise<Recipient> {
  if (input.contact !== undefined) {
    const contact = isId(input.contact, "ctc")
      ? await lookup<ContactRow>(db, CONTACT_BY_ID, [tenantId, input.contact])
      : undefined;
    if (!contact)
      throw new ApiError("resource_missing", `No such contact: ${input.contact}.`, { param: "contact" });
    return {
      contactId: contact.id,
      phone: contact.phone,
      lastInboundAt: contact.last_inbound_at,
      optedOut: contact.opted_out_at !== null,
    };
  }
  const phone = phoneOrRefuse(input.to);
  const contact = await lookup<Omit<ContactRow, "phone">>(db, CONTACT_BY_PHONE, [tenantId, phone]);
  return {
    contactId: contact?.id,
    phone,
    lastInboundAt: contact?.last_inbound_at ?? null,
    optedOut: (contact?.opted_out_at ?? null) !== null,
  };
}
