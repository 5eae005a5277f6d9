import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  buildWebhook,
  type StatusError,
  type WebhookAccount,
  webhookTimestamp,
} from "../../src/channel/webhook-payloads.ts";
import { createShop, inboundStoredWithText, postMessage, statusEventsOf } from "../support/fixtures.ts";
import { call, createTestEnv, postWebhook, type TestEnv } from "../support/index.ts";

// Postgres keeps no NUL character in text or jsonb: a string that carries one must be answered
// before it reaches a statement (an integrator's request: 400 naming the field) or made storable
// (the provider's webhook: taken, with U+FFFD in its place), never a 500 or a webhook retried forever.

let env: TestEnv;
let token: string;
let account: WebhookAccount;

beforeAll(async () => {
  env = await createTestEnv();
  ({ token, account } = await createShop(env, "Acme"));
});
afterAll(() => env.close());

/** The provider's signed webhook with this content, through the app. */
const webhook = (content: Parameters<typeof buildWebhook>[1]) =>
  postWebhook(env, buildWebhook(account, content));

describe("NUL characters", () => {
  test("a send that carries one is a 400 naming the field", async () => {
    const response = await postMessage(env.app, token, {
      to: "+4915100000888",
      recipient_name: "Ana\u0000",
      template: {
        name: "order_shipped",
        language: "en",
        variables: { body: { "1": "Ana", "2": "A\u00001" } },
      },
    });
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe("parameter_invalid");
    expect(response.body.error.param).toBe("recipient_name");
  });

  test("a customer's message that carries one is taken and stored, with U+FFFD in its place", async () => {
    const response = await webhook({
      contacts: [{ profile: { name: "Nul\u0000Name" }, wa_id: "4915100000888" }],
      messages: [
        {
          from: "4915100000888",
          id: "wamid.nul-inbound-1",
          timestamp: webhookTimestamp(),
          type: "text",
          text: { body: "before\u0000after" },
        },
      ],
    });
    expect(response.status).toBe(200);
    await inboundStoredWithText(env, "wamid.nul-inbound-1", "before\uFFFDafter");
  });

  test("a failed status whose error carries one is taken and stored", async () => {
    const response = await webhook({
      statuses: [
        {
          id: "wamid.nul-status-unknown",
          status: "failed",
          timestamp: webhookTimestamp(),
          recipient_id: "4915100000888",
          // Only the fields this test needs: the store keeps the errors as received.
          errors: [{ code: 131026, title: "Message\u0000undeliverable" } as StatusError],
        },
      ],
    });
    expect(response.status).toBe(200);
    // Its message is not known yet: it waits, storable.
    const [row] = await statusEventsOf(env.deps.db, "wamid.nul-status-unknown");
    expect(row?.errors).toEqual([{ code: 131026, title: "Message\uFFFDundeliverable" }]);
  });

  test("a form that carries one is refused (the token endpoint: RFC 6749's shape)", async () => {
    const response = await call(env.app, "POST", "/v2/oauth/token", {
      rawBody: "grant_type=client_credentials&client_id=cid_x%00&client_secret=y",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(response.status).toBe(400);
    expect(response.body.error).toBe("invalid_request");
  });

  test("a query or path that carries one is answered, never a 500", async () => {
    const paths = [
      "/v2/contacts?phone=%2B4915100000888%00",
      "/v2/contacts/ctc_abc%00",
      "/v2/contacts/ctc_abc%00/messages",
      "/v2/contacts/ctc_abc/messages?before=msg_x%00",
      "/v2/messages?since=fd_x%00",
      "/v2/senders/snd_x%00/templates",
      "/v2/conversations?limit=1%00",
    ];
    for (const path of paths) {
      const response = await call(env.app, "GET", path, { token });
      expect(response.status, path).toBeGreaterThanOrEqual(400);
      expect(response.status, path).toBeLessThan(500);
    }
  });
});
