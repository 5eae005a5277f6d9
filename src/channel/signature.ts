import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>` on provider webhooks
 * (DESIGN §4). Always computed over the raw bytes as received: re-serialised JSON would not match.
 */
export const SIGNATURE_HEADER = "x-hub-signature-256";

const SIGNATURE_FORMAT = /^sha256=([0-9a-f]{64})$/i;

function hmac(rawBody: string | Uint8Array, appSecret: string): Buffer {
  return createHmac("sha256", appSecret).update(rawBody).digest();
}

/** The header value for a body: `sha256=<lowercase hex>`. */
export function signPayload(rawBody: string | Uint8Array, appSecret: string): string {
  return `sha256=${hmac(rawBody, appSecret).toString("hex")}`;
}

/** True only for a well-formed header whose HMAC matches; compared in constant time. */
export function verifySignature(
  rawBody: string | Uint8Array,
  header: string | null | undefined,
  appSecret: string,
): boolean {
  const hex = header?.trim().match(SIGNATURE_FORMAT)?.[1];
  if (!hex) return false;
  return timingSafeEqual(Buffer.from(hex, "hex"), hmac(rawBody, appSecret));
}
