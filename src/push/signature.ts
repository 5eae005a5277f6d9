import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";

/**
 * How a push (a webhook to an integrator's endpoint, DESIGN §12) is signed: Standard Webhooks
 * (standardwebhooks.com), with the reference library doing the HMAC. `webhook-signature` is
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
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": secrets.map((secret) => new Webhook(secret).sign(id, at, body)).join(" "),
    "content-type": "application/json",
  };
}
