import type { Db } from "../db/connect.ts";
import { newId } from "../ids.ts";

export interface Tenant {
  id: string;
  name: string;
  dailyQuota: number | null;
}

export async function insertTenant(
  db: Db,
  input: { name: string; dailyQuota?: number | null },
): Promise<Tenant> {
  const row = await db
    .insertInto("tenants")
    .values({ id: newId("ten"), name: input.name, daily_quota: input.dailyQuota ?? null })
    .returning(["id", "name", "daily_quota"])
    .executeTakeFirstOrThrow();
  return { id: row.id, name: row.name, dailyQuota: row.daily_quota };
}

export async function findTenant(db: Db, tenantId: string): Promise<Tenant | undefined> {
  const row = await db
    .selectFrom("tenants")
    .select(["id", "name", "daily_quota"])
    .where("id", "=", tenantId)
    .executeTakeFirst();
  return row && { id: row.id, name: row.name, dailyQuota: row.daily_quota };
}
