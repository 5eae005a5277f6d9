import { type Selectable, sql } from "kysely";
import { CHANNEL } from "../channel/provider.ts";
import type { Db } from "../db/connect.ts";
import type { ContactsTable } from "../db/schema.ts";
import { findTenantRow } from "../db/tenant-row.ts";
import type { OptOutChange } from "./opt-out.ts";

export type ContactRow = Selectable<ContactsTable>;

/** A message's contact as the Message's `to` reads it: its id and phone (null when withheld). */
export const CONTACT_REF_COLUMNS = ["contacts.id as contact_id", "contacts.phone as contact_phone"] as const;

/**
 * A joined contact's identity as presentContactRef and presentContactSummary read it (DESIGN §14):
 * its id, phone, BSUID, parent BSUID and username.
 */
export const CONTACT_IDENTITY_COLUMNS = [
  ...CONTACT_REF_COLUMNS,
  "contacts.user_id as contact_user_id",
  "contacts.parent_user_id as contact_parent_user_id",
  "contacts.username as contact_username",
] as const;

/** The row CONTACT_IDENTITY_COLUMNS select. */
export interface ContactIdentityRow {
  contact_id: string;
  contact_phone: string | null;
  contact_user_id: string | null;
  contact_parent_user_id: string | null;
  contact_username: string | null;
}

/** The contact with this id, merged or not (see findLiveContact, identity.ts). */
export function findContact(db: Db, tenantId: string, contactId: string): Promise<ContactRow | undefined> {
  return findTenantRow(db, "contacts", tenantId, contactId);
}

/** `phone` must already be E.164 (contacts are stored that way). */
export async function findContactByPhone(
  db: Db,
  tenantId: string,
  phone: string,
): Promise<ContactRow | undefined> {
  return db
    .selectFrom("contacts")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("channel", "=", CHANNEL)
    .where("phone", "=", phone)
    .executeTakeFirst();
}

export async function tenantHasActiveSender(db: Db, tenantId: string): Promise<boolean> {
  const row = await db
    .selectFrom("senders")
    .select("id")
    .where("tenant_id", "=", tenantId)
    .where("active", "=", true)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Opts the contact out (keeping an earlier `opted_out_at`) or back in, in one statement. Undefined
 * when the tenant has no such contact.
 */
export async function setOptOut(
  db: Db,
  tenantId: string,
  contactId: string,
  change: OptOutChange,
  now: Date,
): Promise<ContactRow | undefined> {
  return db
    .updateTable("contacts")
    .set({ opted_out_at: change === "opt_out" ? sql<Date>`COALESCE(opted_out_at, ${now})` : null })
    .where("tenant_id", "=", tenantId)
    .where("id", "=", contactId)
    .returningAll()
    .executeTakeFirst();
}
