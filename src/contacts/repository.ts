import { type Selectable, sql } from "kysely";
import { CHANNEL } from "../channel/provider.ts";
import type { Db } from "../db/connect.ts";
import type { ContactsTable } from "../db/schema.ts";
import { findTenantRow } from "../db/tenant-row.ts";
import type { OptOutChange } from "./opt-out.ts";

export type ContactRow = Selectable<ContactsTable>;

/** A message's contact as presentContactRef and the Message's `contact_id` and `phone` read it. */
export const CONTACT_REF_COLUMNS = ["contacts.id as contact_id", "contacts.phone as contact_phone"] as const;

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
