import type { Db } from "../db/connect.ts";
import { newId } from "../ids.ts";

export interface Tenant {
  id: string;
  name: string;
  dailyQuota: number | null;
  /** Messages older than this are removed (src/maintenance/retention.ts); 400 unless set. */
  messageRetentionDays: number;
}

export async function insertTenant(
  db: Db,
  input: { name: string; dailyQuota?: number | null },
): Promise<Tenant> {
  const row = await db
    .insertInto("tenants")
    .values({ id: newId("ten"), name: input.name, daily_quota: input.dailyQuota ?? null })
    .returning(["id", "name", "daily_quota", "message_retention_days"])
    .executeTakeFirstOrThrow();
  return presentTenantRow(row);
}

export async function findTenant(db: Db, tenantId: string): Promise<Tenant | undefined> {
  const row = await db
    .selectFrom("tenants")
    .select(["id", "name", "daily_quota", "message_retention_days"])
    .where("id", "=", tenantId)
    .executeTakeFirst();
  return row && presentTenantRow(row);
}

function presentTenantRow(row: {
  id: string;
  name: string;
  daily_quota: number | null;
  message_retention_days: number;
}): Tenant {
  return {
    id: row.id,
    name: row.name,
    dailyQuota: row.daily_quota,
    messageRetentionDays: row.message_retention_days,
  };
}

/**
 * The shortest message retention an operator may set (DESIGN §13): longer than the Idempotency-Key
 * window (24 h, src/messages/idempotency.ts), so a replayed key always finds its message. Tests and
 * benches that need less write the column directly (setMessageRetention does not check it).
 */
export const MIN_MESSAGE_RETENTION_DAYS = 2;

/** Writes the tenant's retention as given: the operator's bounds are checked by the CLI (src/cli/commands/tenants.ts). */
export async function setMessageRetention(db: Db, tenantId: string, days: number): Promise<void> {
  await db.updateTable("tenants").set({ message_retention_days: days }).where("id", "=", tenantId).execute();
}
