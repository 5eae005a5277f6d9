import type { Kysely, Selectable } from "kysely";
import type { Db } from "./connect.ts";
import type { Database } from "./schema.ts";

/** The tables whose rows belong to one tenant and are named by an `id`. */
export type TenantOwnedTable = {
  [T in keyof Database]: Database[T] extends { id: string; tenant_id: string } ? T : never;
}[keyof Database];

/**
 * A tenant's row by its id, or undefined (another tenant's id reads as unknown): the one lookup by
 * id that the resources' repositories share, so none of them can forget the tenant.
 */
export function findTenantRow<T extends TenantOwnedTable>(
  db: Db,
  table: T,
  tenantId: string,
  id: string,
): Promise<Selectable<Database[T]> | undefined> {
  // Kysely cannot name the columns of a table chosen by a type parameter; TenantOwnedTable
  // guarantees that `id` and `tenant_id` exist, so the query is typed against that shape.
  const owned = db as unknown as Kysely<{ owned: { id: string; tenant_id: string } }>;
  return owned
    .selectFrom(table as unknown as "owned")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("id", "=", id)
    .executeTakeFirst() as Promise<Selectable<Database[T]> | undefined>;
}
