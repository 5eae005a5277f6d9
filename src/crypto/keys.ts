import { hkdfSync } from "node:crypto";

/**
 * One root secret (JWT_SECRET), one key per purpose: a key leaked or misused in one place (a CSRF
 * token, a feed cursor) says nothing about the others. HKDF-SHA256 with a fixed salt (the root
 * secret carries the entropy) and the purpose as `info`.
 */

export type KeyPurpose = "access-token" | "feed-cursor" | "panel-csrf" | "provider-token";

const SALT = "messaging-notification-service/keys/v1";

export function deriveKey(rootSecret: string, purpose: KeyPurpose, bytes = 32): Buffer {
  return Buffer.from(hkdfSync("sha256", rootSecret, SALT, purpose, bytes));
}
