import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/**
 * Secrets at rest: AES-256-GCM, a random 12-byte IV per value, stored as
 * `v1:<base64url iv>.<base64url ciphertext+tag>`. The caller's `context` (e.g. the row's id) is
 * authenticated data: a ciphertext copied into another row does not open there.
 */

/** What every sealed value starts with; anything else was stored before sealing. */
export const SEALED_PREFIX = "v1:";
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** The stored value cannot be opened: wrong key, altered ciphertext, or another row's value. */
export class SecretBoxError extends Error {
  constructor(message = "the sealed value cannot be opened") {
    super(message);
    this.name = "SecretBoxError";
  }
}

export function isSealed(stored: string): boolean {
  return stored.startsWith(SEALED_PREFIX);
}

export function seal(key: Buffer, plaintext: string, context: string): string {
  if (key.length !== KEY_BYTES) throw new RangeError(`the key must be ${KEY_BYTES} bytes`);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv("aes-256-gcm", key, iv);
  cipher.setAAD(Buffer.from(context, "utf8"));
  const sealed = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
  return `${SEALED_PREFIX}${iv.toString("base64url")}.${sealed.toString("base64url")}`;
}

export function open(key: Buffer, stored: string, context: string): string {
  if (!isSealed(stored)) throw new SecretBoxError("not a sealed value");
  const [ivText, sealedText, extra] = stored.slice(SEALED_PREFIX.length).split(".");
  const iv = Buffer.from(ivText ?? "", "base64url");
  const sealed = Buffer.from(sealedText ?? "", "base64url");
  if (extra !== undefined || iv.length !== IV_BYTES || sealed.length < TAG_BYTES) throw new SecretBoxError();
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(Buffer.from(context, "utf8"));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    return Buffer.concat([
      decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)),
      decipher.final(),
    ]).toString("utf8");
  } catch {
    throw new SecretBoxError();
  }
}
