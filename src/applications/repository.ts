import type { Db } from "../db/connect.ts";
import type { Scope } from "../http/request-state.ts";

export interface ApplicationRecord {
  clientId: string;
  tenantId: string;
  name: string;
  secretDigest: Buffer;
  scopes: Scope[];
  readLimit: number;
  sendLimit: number;
  revokedAt: Date | null;
  lastTokenAt: Date | null;
  createdAt: Date;
  /** The secret replaced by the last rotation, while it still works (an overlap chosen then). */
  previousSecretDigest: Buffer | null;
  /** When the replaced secret stops working; null when it stopped at the rotation. */
  previousSecretExpiresAt: Date | null;
}

const COLUMNS = [
  "client_id",
  "tenant_id",
  "name",
  "secret_digest",
  "scopes",
  "read_limit",
  "send_limit",
  "revoked_at",
  "last_token_at",
  "created_at",
  "previous_secret_digest",
  "previous_secret_expires_at",
] as const;

type Row = {
  client_id: string;
  tenant_id: string;
  name: string;
  secret_digest: Buffer;
  scopes: string[];
  read_limit: number;
  send_limit: number;
  revoked_at: Date | null;
  last_token_at: Date | null;
  created_at: Date;
  previous_secret_digest: Buffer | null;
  previous_secret_expires_at: Date | null;
};

/** The applications table read with the columns `toRecord` maps. */
function selectApplications(db: Db) {
  return db.selectFrom("applications").select(COLUMNS);
}

function toRecord(row: Row): ApplicationRecord {
  return {
    clientId: row.client_id,
    tenantId: row.tenant_id,
    name: row.name,
    secretDigest: row.secret_digest,
    scopes: row.scopes as Scope[],
    readLimit: row.read_limit,
    sendLimit: row.send_limit,
    revokedAt: row.revoked_at,
    lastTokenAt: row.last_token_at,
    createdAt: row.created_at,
    previousSecretDigest: row.previous_secret_digest,
    previousSecretExpiresAt: row.previous_secret_expires_at,
  };
}

export async function insertApplication(
  db: Db,
  input: Omit<
    ApplicationRecord,
    "revokedAt" | "lastTokenAt" | "createdAt" | "previousSecretDigest" | "previousSecretExpiresAt"
  >,
): Promise<ApplicationRecord> {
  const row = await db
    .insertInto("applications")
    .values({
      client_id: input.clientId,
      tenant_id: input.tenantId,
      name: input.name,
      secret_digest: input.secretDigest,
      scopes: input.scopes,
      read_limit: input.readLimit,
      send_limit: input.sendLimit,
    })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow();
  return toRecord(row);
}

/** By client_id alone: the token endpoint does not know the tenant yet. */
export async function findApplicationByClientId(
  db: Db,
  clientId: string,
): Promise<ApplicationRecord | undefined> {
  const row = await selectApplications(db).where("client_id", "=", clientId).executeTakeFirst();
  return row && toRecord(row);
}

/** One application of one tenant: another tenant's client_id is as absent as an unknown one. */
export async function findTenantApplication(
  db: Db,
  tenantId: string,
  clientId: string,
): Promise<ApplicationRecord | undefined> {
  const row = await selectApplications(db)
    .where("tenant_id", "=", tenantId)
    .where("client_id", "=", clientId)
    .executeTakeFirst();
  return row && toRecord(row);
}

/** A tenant's applications, revoked ones included: active first, then newest first. */
export async function listTenantApplications(db: Db, tenantId: string): Promise<ApplicationRecord[]> {
  const rows = await selectApplications(db)
    .where("tenant_id", "=", tenantId)
    .orderBy((eb) => eb("revoked_at", "is not", null))
    .orderBy("created_at", "desc")
    .orderBy("client_id")
    .execute();
  return rows.map(toRecord);
}

export interface ApplicationScope {
  /** Only this tenant's application (the panel); omitted by operator paths (CLI, token endpoint). */
  tenantId?: string;
  /** Only while it is not revoked: a revoked application is left as it is (undefined is returned). */
  unrevoked?: boolean;
}

/**
 * A revocation keeps the first revoked_at (revoking again changes nothing). A new secret digest
 * replaces the previous one: with `previousSecretExpiresAt`, the secret it replaces keeps working
 * until then (in the same statement, so it is the digest the row had, even under a concurrent
 * rotation); without it, the replaced secret stops at once and any earlier overlap ends too.
 * Undefined when no application matches the client_id and `scope`.
 */
export async function updateApplication(
  db: Db,
  clientId: string,
  changes: { secretDigest?: Buffer; previousSecretExpiresAt?: Date; revokedAt?: Date; lastTokenAt?: Date },
  scope: ApplicationScope = {},
): Promise<ApplicationRecord | undefined> {
  let query = db
    .updateTable("applications")
    .set((eb) => ({
      ...(changes.secretDigest && {
        secret_digest: changes.secretDigest,
        // The right-hand sides read the row as it was: the digest being replaced.
        previous_secret_digest: changes.previousSecretExpiresAt ? eb.ref("secret_digest") : null,
        previous_secret_expires_at: changes.previousSecretExpiresAt ?? null,
      }),
      ...(changes.revokedAt && { revoked_at: eb.fn.coalesce("revoked_at", eb.val(changes.revokedAt)) }),
      ...(changes.lastTokenAt && { last_token_at: changes.lastTokenAt }),
    }))
    .where("client_id", "=", clientId);
  if (scope.tenantId !== undefined) query = query.where("tenant_id", "=", scope.tenantId);
  if (scope.unrevoked) query = query.where("revoked_at", "is", null);
  const row = await query.returning(COLUMNS).executeTakeFirst();
  return row && toRecord(row);
}
