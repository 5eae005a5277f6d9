import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { signPayload } from "../../src/channel/signature.ts";
import { buildWebhook } from "../../src/channel/webhook-payloads.ts";
import { createRejectionTally } from "../../src/http/rejection-tally.ts";
import { createShop, type Shop } from "../support/fixtures.ts";
import { createTestEnv, type TestEnv } from "../support/index.ts";

/**
 * A caller that keeps posting webhooks we refuse (unsigned, badly signed) is turned away for the
 * rest of the minute before its bodies are read (src/http/rejection-tally.ts). Its own env: the
 * tally is the api process's, and every request here comes from one address.
 */
let env: TestEnv;
let shop: Shop;
beforeAll(async () => {
  env = await createTestEnv();
  shop = await createShop(env, "Rejections");
});
afterAll(() => env.close());

function post(raw: string, signature?: string, app = env.app) {
  return app.handle(
    new Request("http://localhost/webhooks/whatsapp", {
      method: "POST",
      headers: { "content-type": "application/json", ...(signature && { "x-hub-signature-256": signature }) },
      body: raw,
    }),
  );
}

describe("refused webhooks", () => {
  test("after 20 refused webhooks in a minute, the 21st post is turned away (429), signed ones too", async () => {
    const raw = JSON.stringify(buildWebhook(shop.account, {}));
    for (let i = 0; i < 20; i++) expect((await post(raw, "sha256=00")).status).toBe(401);
    // Counted where the refusal is decided, before its answer leaves: the 21st is turned away.
    const turnedAway = await post(raw, "sha256=00");
    expect(turnedAway.status).toBe(429);
    const retryAfter = Number(turnedAway.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect((await post(raw, signPayload(raw, "dev-app-secret"))).status).toBe(429);
  });

  test("refusals raised as errors (a signed body that is not JSON: 400) count too", async () => {
    // A fresh app: its own tally, with nothing counted yet.
    const app = createApp(env.deps);
    const notJson = "{ not json";
    for (let i = 0; i < 20; i++) {
      const answer = await post(notJson, signPayload(notJson, "dev-app-secret"), app);
      expect(answer.status).toBe(400);
    }
    expect((await post(notJson, signPayload(notJson, "dev-app-secret"), app)).status).toBe(429);
  });

  test("the caller's address is not worked out while no address is counted", () => {
    let now = 0;
    const tally = createRejectionTally({ limit: 2, windowMs: 1000, now: () => now });
    const noAddress = () => {
      throw new Error("the address was asked for");
    };
    expect(tally.exceeded(noAddress)).toBe(false);
    tally.record("10.0.0.1");
    tally.record("10.0.0.1");
    expect(tally.exceeded(() => "10.0.0.1")).toBe(true);
    expect(tally.exceeded(() => "10.0.0.2")).toBe(false);
    now = 1000;
    expect(tally.exceeded(() => "10.0.0.1")).toBe(false);
  });
});
