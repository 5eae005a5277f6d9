/**
 * Issue 20: strings Postgres cannot store, at the door, everywhere. A lone UTF-16 surrogate (JSON's
 * `\ud800` alone) was a 500 from Postgres in a send (and sent its accept batch into committing item
 * by item) and in a signed webhook (retried by the provider for days, the customer's message never
 * stored); a NUL in a multipart field was a 500 after the file had been uploaded.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { buildWebhook, webhookTimestamp } from "../../src/channel/webhook-payloads.ts";
import { createShop, inboundStoredWithText, type Shop } from "../support/fixtures.ts";
import { call, createTestEnv, postWebhook, type TestEnv } from "../support/index.ts";

let env: TestEnv;
let shop: Shop;

/**
 * Lone surrogates as JSON escapes: high, low, a reversed pair, high at the end of a string. Written
 * into the JSON text by hand: JSON.stringify would escape them the same way, but says so less plainly.
 */
const LONE = {
  high: "\\ud800",
  low: "\\udc00",
  reversed: "\\ude00\\ud83d",
  "high at the end": "abc\\ud83d",
};

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  shop = await createShop(env, "Acme", { templates: true });
});
afterAll(() => env.close());

function sendRaw(json: string) {
  return call(env.app, "POST", "/v2/messages", {
    token: shop.token,
    rawBody: json,
    headers: { "content-type": "application/json" },
  });
}

async function outboundCount(): Promise<number> {
  const row = await env.deps.db
    .selectFrom("messages")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("tenant_id", "=", shop.tenantId)
    .where("direction", "=", "outbound")
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

describe("lone surrogates from an integrator: 400 naming the field", () => {
  for (const [name, lone] of Object.entries(LONE)) {
    test(`${name}, in a template variable, the body and recipient_name`, async () => {
      const variable = await sendRaw(
        `{"to":"+4915100000777","template":{"name":"order_shipped","language":"en","variables":{"body":["Ana","A-${lone}"]}}}`,
      );
      expect(variable.status).toBe(400);
      expect(variable.body.error).toMatchObject({
        code: "parameter_invalid",
        param: "template.variables.body.1",
      });
      expect(variable.body.error.message).toContain("unpaired UTF-16 surrogates");

      const text = await sendRaw(`{"to":"+4915100000777","body":"hi ${lone}"}`);
      expect(text.status).toBe(400);
      expect(text.body.error).toMatchObject({ code: "parameter_invalid", param: "body" });

      const recipient = await sendRaw(
        `{"to":"+4915100000777","recipient_name":"${lone}","template":{"name":"order_shipped","language":"en","variables":{"body":["Ana","A-1"]}}}`,
      );
      expect(recipient.body.error).toMatchObject({ code: "parameter_invalid", param: "recipient_name" });
    });
  }

  test("as an object key", async () => {
    const response = await sendRaw(
      `{"to":"+4915100000777","template":{"name":"order_shipped","language":"en","variables":{"body":{"1":"Ana","\\ud800":"x"}}}}`,
    );
    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe("parameter_invalid");
    expect(response.body.error.param).toBe("template.variables.body.\ud800");
  });

  test("a whole pair is a character like any other: the send is accepted", async () => {
    const response = await sendRaw(
      `{"to":"+4915100000777","template":{"name":"order_shipped","language":"en","variables":{"body":["Ana \\ud83d\\ude00","A-1"]}}}`,
    );
    expect(response.status).toBe(201);
  });

  test("a bad send among concurrent good ones: the good ones are accepted, the bad one alone refused", async () => {
    const before = await outboundCount();
    const good = (i: number) =>
      `{"to":"+49151000008${String(i).padStart(2, "0")}","template":{"name":"order_shipped","language":"en","variables":{"body":["Ana","A-${i}"]}}}`;
    const results = await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => sendRaw(good(i))),
      sendRaw(`{"to":"+4915100000899","body":"\\udfff"}`),
    ]);
    expect(results.slice(0, 10).map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(results[10]?.status).toBe(400);
    expect(await outboundCount()).toBe(before + 10);
  });

  test("the token endpoint, JSON and form (RFC 6749's shape)", async () => {
    const json = await call(env.app, "POST", "/v2/oauth/token", {
      rawBody: `{"grant_type":"client_credentials","client_id":"cid_\\ud800","client_secret":"y"}`,
      headers: { "content-type": "application/json" },
    });
    expect(json.status).toBe(400);
    expect(json.body.error).toBe("invalid_request");
    // A form percent-encodes UTF-8: a surrogate's bytes (CESU-8) are not UTF-8 and decode to U+FFFD.
    const form = await call(env.app, "POST", "/v2/oauth/token", {
      rawBody: "grant_type=client_credentials&client_id=cid_%ED%A0%80&client_secret=y",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(form.status).toBeLessThan(500);
  });
});

describe("lone surrogates from the provider: taken, with U+FFFD in their place", () => {
  test("a customer's message is stored, its text and profile name made whole", async () => {
    const body = JSON.stringify(
      buildWebhook(shop.account, {
        contacts: [{ profile: { name: "Ana SURROGATE" }, wa_id: "4915100000777" }],
        messages: [
          {
            from: "4915100000777",
            id: "wamid.surrogate-inbound-1",
            timestamp: webhookTimestamp(),
            type: "text",
            text: { body: "before SURROGATE after" },
          },
        ],
      }),
    ).replaceAll("SURROGATE", "\\ud83d");
    const response = await postWebhook(env, body);
    expect(response.status).toBe(200);
    await inboundStoredWithText(env, "wamid.surrogate-inbound-1", "before \uFFFD after");
  });
});

describe("multipart fields (POST /media): refused before anything is uploaded", () => {
  async function mediaRows(): Promise<number> {
    const row = await env.deps.db
      .selectFrom("media")
      .select((eb) => eb.fn.countAll<string>().as("n"))
      .where("tenant_id", "=", shop.tenantId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  test("a NUL in filename, and in the file part's own name", async () => {
    const pdf = new Blob([new TextEncoder().encode("%PDF-1.7\n")], { type: "application/pdf" });
    const withField = new FormData();
    withField.append("file", pdf, "invoice.pdf");
    withField.append("filename", "in\u0000voice.pdf");
    const field = await call(env.app, "POST", "/v2/media", { rawBody: withField, token: shop.token });
    expect(field.status).toBe(400);
    expect(field.body.error).toMatchObject({ code: "parameter_invalid", param: "filename" });

    const withName = new FormData();
    withName.append("file", pdf, "in\u0000voice.pdf");
    const name = await call(env.app, "POST", "/v2/media", { rawBody: withName, token: shop.token });
    expect(name.status).toBe(400);
    expect(name.body.error).toMatchObject({ code: "parameter_invalid", param: "file" });
    expect(await mediaRows()).toBe(0);
  });
});
