import type { ColumnType, Generated } from "kysely";

/** Kysely's view of the tables in sql/. Keep in step with the migrations. */
export interface Database {
  tenants: TenantsTable;
  applications: ApplicationsTable;
  schema_migrations: SchemaMigrationsTable;
}

type CreatedAt = ColumnType<Date, Date | undefined, never>;

export interface TenantsTable {
  id: string;
  name: string;
  daily_quota: number | null;
  created_at: CreatedAt;
}

export interface ApplicationsTable {
  client_id: string;
  tenant_id: string;
  name: string;
  secret_digest: Buffer;
  scopes: string[];
  read_limit: Generated<number>;
  send_limit: Generated<number>;
  revoked_at: Date | null;
  last_token_at: Date | null;
  created_at: CreatedAt;
}

export interface SchemaMigrationsTable {
  name: string;
  applied_at: ColumnType<Date, Date | undefined, never>;
}
