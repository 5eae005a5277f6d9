import type { WebhookEvent } from "./types.ts";

/**
 * Verifies a push from the service (Standard Webhooks, standardwebhooks.com) with the platform's
 * WebCrypto: no dependency. Give it the body exactly as received (bytes or text, before any JSON
 * parsing: a re-serialized body no longer matches), the request's headers and the endpoint's
 * `whsec_` secret.
 */

/** A delivery whose signature, headers or timestamp do not hold; nothing of it should be trusted. */
export class WebhookVerificationError extends Error {
  override readonly name = "WebhookVerificationError";
}

export interface VerifyOptions {
  /** How far `webhook-timestamp` may be from now, either way, in seconds. Default 300. */
  toleranceSeconds?: number;
  /** Milliseconds since the epoch; replaces Date.now. */
  now?: () => number;
}

type HeaderSource = Headers | Record<string, string | string[] | undefined>;

const SECRET_PREFIX = "whsec_";

/** The verified event; throws WebhookVerificationError otherwise. De-duplicate by its `id`. */
export async function verifyWebhook(
  rawBody: string | Uint8Array,
  headers: HeaderSource,
  secret: string,
  options: VerifyOptions = {},
): Promise<WebhookEvent> {
  const id = header(headers, "webhook-id");
  const timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError("Missing webhook headers");
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError("Invalid webhook-timestamp");
  const tolerance = options.toleranceSeconds ?? 300;
  const now = Math.floor((options.now ?? Date.now)() / 1000);
  if (Math.abs(now - Number(timestamp)) > tolerance) {
    throw new WebhookVerificationError(
      "webhook-timestamp is outside the tolerance (a replay or a stale delivery)",
    );
  }
  const body = typeof rawBody === "string" ? new TextEncoder().encode(rawBody) : rawBody;
  const expected = await sign(secret, id, timestamp, body);
  const given = signatures
    .split(" ")
    .filter((entry) => entry.startsWith("v1,"))
    .map((entry) => base64ToBytes(entry.slice(3)));
  if (!given.some((signature) => signature !== undefined && sameBytes(signature, expected))) {
    throw new WebhookVerificationError("No matching signature");
  }
  try {
    return JSON.parse(new TextDecoder().decode(body)) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError("The body is not JSON");
  }
}

async function sign(secret: string, id: string, timestamp: string, body: Uint8Array): Promise<Uint8Array> {
  const keyBytes = base64ToBytes(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
  );
  if (!keyBytes || keyBytes.length === 0)
    throw new WebhookVerificationError("The secret is not a whsec_ secret");
  const key = await crypto.subtle.importKey(
    "raw",
    keyBytes as BufferSource,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const prefix = new TextEncoder().encode(`${id}.${timestamp}.`);
  const signed = new Uint8Array(prefix.length + body.length);
  signed.set(prefix);
  signed.set(body, prefix.length);
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, signed as BufferSource));
}

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (key.toLowerCase() === name) return Array.isArray(value) ? value.join(" ") : value;
  }
  return undefined;
}

function base64ToBytes(text: string): Uint8Array | undefined {
  try {
    return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
  } catch {
    return undefined;
  }
}

/** Constant time for equal lengths: the time taken says nothing of where a guess went wrong. */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= (a[i] as number) ^ (b[i] as number);
  return diff === 0;
}
