/**
 * Issue 22 (first part): pushes are signed per Standard Webhooks. Interoperability with the
 * reference implementation (the `standardwebhooks` package): it verifies what the service signs
 * (src/push/signature.ts), and the SDK's verify accepts what it signs; rotation signs with both
 * secrets; a tampered, unsigned or stale delivery is refused.
 */
import { describe, expect, test } from "bun:test";
import { Webhook } from "standardwebhooks";
import { newEndpointSecret, signDelivery } from "../../src/push/signature.ts";
import {
  type FeedMessage,
  MessagingClient,
  verifyWebhook,
  type WebhookEvent,
  WebhookVerificationError,
} from "../src/index.ts";

const event: WebhookEvent = {
  object: "event",
  id: "evt_2Hj8Kl4mNp6Qr8St0UvWxY",
  type: "message.delivered",
  created: 1_800_000_000,
  data: { id: "msg_1", object: "message" } as unknown as FeedMessage,
};
const body = JSON.stringify(event);

describe("the service signs, the reference verifies", () => {
  test("one secret", () => {
    const secret = newEndpointSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const headers = signDelivery(event.id, body, new Date(), [secret]);
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(event);
  });

  test("during a rotation both secrets sign: a receiver with either one verifies", () => {
    const [current, previous] = [newEndpointSecret(), newEndpointSecret()];
    const headers = signDelivery(event.id, body, new Date(), [current, previous]);
    expect(headers["webhook-signature"].split(" ")).toHaveLength(2);
    expect(new Webhook(current).verify(body, { ...headers })).toEqual(event);
    expect(new Webhook(previous).verify(body, { ...headers })).toEqual(event);
    expect(() => new Webhook(newEndpointSecret()).verify(body, { ...headers })).toThrow();
  });
});

describe("the service's HMAC is the reference's, byte for byte", () => {
  test("for bodies with non-ASCII text, at several times, with several secrets", () => {
    const unicode = JSON.stringify({ ...event, data: { text: "Olá, 注文 👋 \u2028 ok" } });
    for (const at of [new Date(0), new Date(1_800_000_000_123), new Date()]) {
      const [a, b] = [newEndpointSecret(), newEndpointSecret()];
      const headers = signDelivery(event.id, unicode, at, [a, b]);
      const reference = [a, b].map((secret) => new Webhook(secret).sign(event.id, at, unicode)).join(" ");
      expect(headers["webhook-signature"]).toBe(reference);
      expect(headers["webhook-timestamp"]).toBe(String(Math.floor(at.getTime() / 1000)));
    }
  });
});

describe("the reference signs, the SDK verifies", () => {
  const secret = newEndpointSecret();
  const signedNow = (payload = body, at = new Date()) => ({
    "webhook-id": event.id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": new Webhook(secret).sign(event.id, at, payload),
  });

  test("a delivery, from text, bytes or a Headers object; client.webhooks.verify too", async () => {
    const headers = signedNow();
    expect(await verifyWebhook(body, headers, secret)).toEqual(event);
    expect(await verifyWebhook(new TextEncoder().encode(body), new Headers(headers), secret)).toEqual(event);
    const client = new MessagingClient({
      baseUrl: "http://127.0.0.1:9/v2",
      clientId: "cid_x",
      clientSecret: "x",
    });
    expect(await client.webhooks.verify(body, headers, secret)).toEqual(event);
  });

  test("a rotation's two signatures: either secret verifies", async () => {
    const other = newEndpointSecret();
    const at = new Date();
    const headers = signDelivery(event.id, body, at, [other, secret]);
    expect(await verifyWebhook(body, headers, secret)).toEqual(event);
    expect(await verifyWebhook(body, headers, other)).toEqual(event);
  });

  test("refused: a changed body, another secret, no signature, a stale or future timestamp", async () => {
    const refused = async (...args: Parameters<typeof verifyWebhook>) => {
      const error = await verifyWebhook(...args).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(WebhookVerificationError);
    };
    const headers = signedNow();
    await refused(body.replace("delivered", "read"), headers, secret);
    await refused(body, headers, newEndpointSecret());
    await refused(body, { ...headers, "webhook-signature": "" }, secret);
    await refused(body, { ...headers, "webhook-signature": "v1,AAAA" }, secret);
    const { "webhook-id": _id, ...withoutId } = headers;
    await refused(body, withoutId, secret);
    const sixMinutes = 6 * 60 * 1000;
    await refused(body, signedNow(body, new Date(Date.now() - sixMinutes)), secret);
    await refused(body, signedNow(body, new Date(Date.now() + sixMinutes)), secret);
    // Within the 5-minute tolerance both ways: accepted.
    expect(await verifyWebhook(body, signedNow(body, new Date(Date.now() - 4 * 60 * 1000)), secret)).toEqual(
      event,
    );
  });
});
