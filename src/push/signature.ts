import { createHmac, randomBytes } from "node:crypto";

/**
 * How a push (a webhook to an integrator's endpoint, DESIGN §12) is signed: Standard Webhooks
 * (standardwebhooks.com), the HMAC by node:crypto (the reference library's pure-JS SHA-256 cost the
 * webhook worker a third of its CPU; the tests check both agree, both ways). `webhook-signature` is
 * `v1,` + base64 HMAC-SHA256 over `{id}.{timestamp}.{body}`, keyed by the base64 after `whsec_`;
 * during a secret rotation both secrets sign, their signatures separated by a space, so a receiver
 * that knows either one accepts the delivery.
 */

export const SECRET_PREFIX = "whsec_";
/** Bytes of a new endpoint secret (Standard Webhooks asks for 24 to 64). */
const SECRET_BYTES = 32;

/** A new endpoint secret: `whsec_` + base64 of 32 random bytes. */
export function newEndpointSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString("base64")}`;
}

export type SignedDelivery = {
  "webhook-id": string;
  "webhook-timestamp": string;
  "webhook-signature": string;
  "content-type": "application/json";
};

/**
 * The headers of one delivery of `body` (the event's JSON, sent as is) as event `id` at `at`,
 * signed by every secret in force (the current one first).
 */
export function signDelivery(id: string, body: string, at: Date, secrets: readonly string[]): SignedDelivery {
  if (secrets.length === 0) throw new Error("a delivery needs at least one secret");
  const timestamp = String(Math.floor(at.getTime() / 1000));
  const signed = `${id}.${timestamp}.${body}`;
  return {
    "webhook-id": id,
    "webhook-timestamp": timestamp,
    "webhook-signature": secrets
      .map((secret) => `v1,${createHmac("sha256", keyOf(secret)).update(signed).digest("base64")}`)
      .join(" "),
    "content-type": "application/json",
  };
}

/** The HMAC key of a secret: the base64 after `whsec_`. */
function keyOf(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error("an endpoint secret starts with whsec_");
  return Buffer.from(secret.slice(SECRET_PREFIX.length), "base64");
}
