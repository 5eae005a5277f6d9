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

/** The contact with this id, merged or not (see findLiveContact). */
export function findContact(db: Db, tenantId: string, contactId: string): Promise<ContactRow | undefined> {
  return findTenantRow(db, "contacts", tenantId, contactId);
}

/** Merges are flattened (a survivor is never merged itself), so a chain is one step; more is a guard. */
const MERGE_HOPS_MAX = 8;

/**
 * The live contact an id names (DESIGN §14): the contact itself, or, for a contact merged into
 * another, its survivor (whose `id` differs). Undefined for an unknown or another tenant's id.
 */
export async function findLiveContact(
  db: Db,
  tenantId: string,
  contactId: string,
): Promise<ContactRow | undefined> {
  let contact = await findContact(db, tenantId, contactId);
  for (let hop = 0; contact?.merged_into && hop < MERGE_HOPS_MAX; hop++) {
    contact = await findContact(db, tenantId, contact.merged_into);
  }
  return contact;
}

/**
 * The live contact the provider knows by this BSUID (DESIGN §14): its current one, one it had
 * before (contact_user_ids, kept after a BSUID change or a merge), or its parent BSUID.
 */
export async function findContactByUserId(
  db: Db,
  tenantId: string,
  userId: string,
): Promise<ContactRow | undefined> {
  const current = await db
    .selectFrom("contacts")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("user_id", "=", userId)
    .where("merged_into", "is", null)
    .executeTakeFirst();
  if (current) return current;
  const former = await db
    .selectFrom("contact_user_ids")
    .select("contact_id")
    .where("tenant_id", "=", tenantId)
    .where("user_id", "=", userId)
    .executeTakeFirst();
  if (former) return findLiveContact(db, tenantId, former.contact_id);
  return db
    .selectFrom("contacts")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("parent_user_id", "=", userId)
    .where("merged_into", "is", null)
    .orderBy("created_at")
    .limit(1)
    .executeTakeFirst();
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
