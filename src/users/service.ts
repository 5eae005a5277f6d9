import { createHash, randomBytes } from "node:crypto";
import type { Db } from "../db/connect.ts";
import { newId } from "../ids.ts";
import {
  findLivePanelSession,
  findPanelUserForSignIn,
  insertPanelSession,
  insertPanelUser,
  type PanelUser,
} from "./repository.ts";

/** A panel session lasts this long from sign-in; then the user signs in again. */
export const SESSION_TTL_MS = 12 * 3600 * 1000;
export const PASSWORD_MIN_LENGTH = 10;
const PASSWORD_MAX_LENGTH = 256;

export class UserInputError extends Error {
  constructor(
    readonly field: "email" | "password" | "tenant",
    message: string,
  ) {
    super(message);
  }
}

export function normalizeEmail(email: string): string | undefined {
  const value = email.trim().toLowerCase();
  return value.length <= 254 && /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(value) ? value : undefined;
}

// argon2id (memory-hard). Verified against when the email is unknown, so the time a sign-in takes
// does not tell which addresses have accounts.
const DECOY_HASH = Bun.password.hash(randomBytes(16).toString("hex"), { algorithm: "argon2id" });

export async function createPanelUser(
  db: Db,
  input: { tenantId: string; email: string; password: string },
): Promise<PanelUser> {
  const email = normalizeEmail(input.email);
  if (!email) throw new UserInputError("email", "The email address is not valid.");
  if (input.password.length < PASSWORD_MIN_LENGTH || input.password.length > PASSWORD_MAX_LENGTH) {
    throw new UserInputError(
      "password",
      `The password must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters long.`,
    );
  }
  const passwordHash = await Bun.password.hash(input.password, { algorithm: "argon2id" });
  const user = await insertPanelUser(db, { id: newId("usr"), tenantId: input.tenantId, email, passwordHash });
  if (!user) throw new UserInputError("email", `A user with the email ${email} exists already.`);
  return user;
}

/** The user when the email and password match; the same work is done when the email is unknown. */
export async function verifyPanelCredentials(db: Db, email: string, password: string) {
  const normalized = normalizeEmail(email);
  const user = normalized ? await findPanelUserForSignIn(db, normalized) : undefined;
  const candidate = password.slice(0, PASSWORD_MAX_LENGTH);
  const matches = await Bun.password.verify(candidate, user?.password_hash ?? (await DECOY_HASH));
  return user && matches ? { userId: user.id, tenantId: user.tenant_id, email: user.email } : undefined;
}

export function sessionDigest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** A new session for the user; the token is the cookie value (only its digest is stored). */
export async function startPanelSession(
  db: Db,
  user: { userId: string; tenantId: string },
  now: Date,
): Promise<string> {
  const token = randomBytes(32).toString("base64url");
  const expiresAt = new Date(now.getTime() + SESSION_TTL_MS);
  await insertPanelSession(db, { tokenDigest: sessionDigest(token), ...user, expiresAt });
  return token;
}

export interface PanelSession {
  /** The cookie value's digest: the session's key, and what CSRF tokens are bound to. */
  digest: Buffer;
  userId: string;
  email: string;
  tenantId: string;
  tenantName: string;
}

export async function loadPanelSession(db: Db, token: string, now: Date): Promise<PanelSession | undefined> {
  if (token.length === 0 || token.length > 100) return undefined;
  const digest = sessionDigest(token);
  const row = await findLivePanelSession(db, digest, now);
  return (
    row && {
      digest,
      userId: row.user_id,
      email: row.email,
      tenantId: row.tenant_id,
      tenantName: row.tenant_name,
    }
  );
}
