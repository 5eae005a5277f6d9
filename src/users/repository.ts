import type { Db } from "../db/connect.ts";

export interface PanelUser {
  id: string;
  tenantId: string;
  email: string;
  createdAt: Date;
}

export async function insertPanelUser(
  db: Db,
  input: { id: string; tenantId: string; email: string; passwordHash: string },
): Promise<PanelUser | undefined> {
  const row = await db
    .insertInto("panel_users")
    .values({
      id: input.id,
      tenant_id: input.tenantId,
      email: input.email,
      password_hash: input.passwordHash,
    })
    .onConflict((oc) => oc.column("email").doNothing())
    .returning(["id", "tenant_id", "email", "created_at"])
    .executeTakeFirst();
  return row && { id: row.id, tenantId: row.tenant_id, email: row.email, createdAt: row.created_at };
}

/** By email alone: sign-in does not know the tenant yet. */
export async function findPanelUserForSignIn(db: Db, email: string) {
  return db
    .selectFrom("panel_users")
    .select(["id", "tenant_id", "email", "password_hash"])
    .where("email", "=", email)
    .executeTakeFirst();
}

export async function insertPanelSession(
  db: Db,
  input: { tokenDigest: Buffer; userId: string; tenantId: string; expiresAt: Date },
): Promise<void> {
  await db
    .insertInto("panel_sessions")
    .values({
      token_digest: input.tokenDigest,
      user_id: input.userId,
      tenant_id: input.tenantId,
      expires_at: input.expiresAt,
    })
    .execute();
}

/** The session's user and tenant, while the session lasts. */
export async function findLivePanelSession(db: Db, tokenDigest: Buffer, now: Date) {
  return db
    .selectFrom("panel_sessions")
    .innerJoin("panel_users", "panel_users.id", "panel_sessions.user_id")
    .innerJoin("tenants", "tenants.id", "panel_sessions.tenant_id")
    .select([
      "panel_users.id as user_id",
      "panel_users.email",
      "panel_sessions.tenant_id",
      "tenants.name as tenant_name",
    ])
    .where("panel_sessions.token_digest", "=", tokenDigest)
    .where("panel_sessions.expires_at", ">", now)
    .executeTakeFirst();
}

export async function deletePanelSession(db: Db, tokenDigest: Buffer): Promise<void> {
  await db.deleteFrom("panel_sessions").where("token_digest", "=", tokenDigest).execute();
}

export async function deleteExpiredPanelSessions(db: Db, now: Date): Promise<number> {
  const result = await db.deleteFrom("panel_sessions").where("expires_at", "<=", now).executeTakeFirst();
  return Number(result.numDeletedRows);
}
