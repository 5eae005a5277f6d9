import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import {
  normalizeProviderError,
  type OutboundPayload,
  outboundAddress,
  type ProviderError,
  type SenderCredentials,
} from "../../src/channel/provider.ts";
import { signPayload, verifySignature } from "../../src/channel/signature.ts";
import { createWhatsAppProvider } from "../../src/channel/whatsapp.ts";
import { createSimulator } from "../../src/simulator/app.ts";
import { TEMPLATE_CATALOGUE } from "../../src/simulator/catalogue.ts";

// The adapter against the simulator over real HTTP. Status webhooks are not under test here: their
// delay is longer than the file runs, and stop() cancels them.
const simulator = createSimulator({
  webhookUrl: "http://127.0.0.1:9/webhooks/whatsapp",
  appSecret: "adapter-test-secret",
  statusDelayMs: 60_000,
});
simulator.app.listen({ port: 0, hostname: "127.0.0.1" });
const simulatorUrl = `http://127.0.0.1:${simulator.app.server?.port}`;

// Accepts connections and never answers, for the timeout case.
const silentServer = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: () => new Promise<Response>(() => {}),
});

const provider = createWhatsAppProvider({ baseUrl: simulatorUrl });
const creds: SenderCredentials = {
  phoneNumberId: "109876543210001",
  wabaId: "200000000000001",
  accessToken: "test-token",
};

afterAll(async () => {
  simulator.stop();
  await simulator.app.stop(true);
  await silentServer.stop(true);
});

beforeEach(async () => {
  await fetch(`${simulatorUrl}/_sim/reset`, { method: "POST" });
});

async function sentPayloads(): Promise<unknown[]> {
  const answer = await fetch(`${simulatorUrl}/_sim/sent?phone_number_id=${creds.phoneNumberId}`);
  const { data } = (await answer.json()) as { data: { payload: unknown }[] };
  return data.map((record) => record.payload);
}

async function failNext(code: number) {
  await fetch(`${simulatorUrl}/_sim/fail-next`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ count: 1, code }),
  });
}

async function providerError(promise: Promise<unknown>): Promise<ProviderError> {
  try {
    await promise;
  } catch (error) {
    return error as ProviderError;
  }
  throw new Error("expected a ProviderError");
}

type TemplateSend = Extract<OutboundPayload, { kind: "template" }>;

/** A send of the template `name` in `language` to +1 415 555 0123. */
const templateSend = (
  name: string,
  language: string,
  components: TemplateSend["components"] = {},
): TemplateSend => ({
  kind: "template",
  to: "+14155550123",
  name,
  language,
  components,
});

/** A text "hi" to +1 415 555 0123. */
const HI: OutboundPayload = { kind: "text", to: "+14155550123", body: "hi" };

/** What a caller decides by: the error's code, whether to retry, the HTTP status and the Graph code. */
const verdict = (error: ProviderError) => [error.code, error.retryable, error.httpStatus, error.providerCode];

describe("sending", () => {
  test("text: the Graph body reaches the provider, and the wamid comes back", async () => {
    const body = "Your parcel is on its way.\nTrack it at https://example.com/t/1";
    const { providerMessageId } = await provider.sendMessage(creds, {
      kind: "text",
      to: "+4915112345678",
      body,
    });

    expect(providerMessageId).toMatch(/^wamid\.[A-Za-z0-9_-]+$/);
    expect(await sentPayloads()).toEqual([
      {
        messaging_product: "whatsapp",
        recipient_type: "individual",
        to: "4915112345678",
        type: "text",
        text: { body },
      },
    ]);
  });

  test("to a BSUID: `recipient` instead of `to`; a phone keeps `to`, byte for byte as before", async () => {
    await provider.sendMessage(creds, {
      kind: "text",
      recipient: "DE.1502576394655843",
      body: "hi",
      callbackData: "msg_1",
    });
    await provider.sendMessage(creds, {
      kind: "template",
      name: "welcome",
      language: "en",
      components: {},
      ...outboundAddress({ userId: "US.ENT.118" }),
    });
    await provider.sendMessage(creds, {
      kind: "text",
      body: "hi",
      ...outboundAddress({ phone: "+14155550123" }),
      callbackData: "msg_2",
    });

    const answer = await fetch(`${simulatorUrl}/_sim/sent?phone_number_id=${creds.phoneNumberId}`);
    const { data } = (await answer.json()) as { data: { payload: unknown; recipient?: string }[] };
    expect(data.map((record) => record.recipient)).toEqual(["DE.1502576394655843", "US.ENT.118", undefined]);
    // Key order too: the phone path's body is the one sent before BSUIDs existed.
    expect(data.map((record) => JSON.stringify(record.payload))).toEqual([
      JSON.stringify({
        messaging_product: "whatsapp",
        recipient_type: "individual",
        recipient: "DE.1502576394655843",
        biz_opaque_callback_data: "msg_1",
        type: "text",
        text: { body: "hi" },
      }),
      JSON.stringify({
        messaging_product: "whatsapp",
        recipient_type: "individual",
        recipient: "US.ENT.118",
        type: "template",
        template: { name: "welcome", language: { code: "en" } },
      }),
      JSON.stringify({
        messaging_product: "whatsapp",
        recipient_type: "individual",
        to: "14155550123",
        biz_opaque_callback_data: "msg_2",
        type: "text",
        text: { body: "hi" },
      }),
    ]);
  });

  test("template with a text header, body values and a URL button", async () => {
    await provider.sendMessage(
      creds,
      templateSend("appointment_reminder", "en", {
        header: { type: "text", text: "Ana" },
        body: ["May 4", "10:30"],
        buttons: [{ index: 0, text: "ABC123" }],
      }),
    );

    expect(await sentPayloads()).toEqual([
      {
        messaging_product: "whatsapp",
        recipient_type: "individual",
        to: "14155550123",
        type: "template",
        template: {
          name: "appointment_reminder",
          language: { code: "en" },
          components: [
            { type: "header", parameters: [{ type: "text", text: "Ana" }] },
            {
              type: "body",
              parameters: [
                { type: "text", text: "May 4" },
                { type: "text", text: "10:30" },
              ],
            },
            { type: "button", sub_type: "url", index: "0", parameters: [{ type: "text", text: "ABC123" }] },
          ],
        },
      },
    ]);
  });

  test("template without values sends no components", async () => {
    await provider.sendMessage(creds, templateSend("welcome", "en"));

    expect(await sentPayloads()).toEqual([
      {
        messaging_product: "whatsapp",
        recipient_type: "individual",
        to: "14155550123",
        type: "template",
        template: { name: "welcome", language: { code: "en" } },
      },
    ]);
  });

  test("uploaded media serves as a document header, with its filename", async () => {
    const pdf = new TextEncoder().encode("%PDF-1.4\n% a tiny test file\n");
    const { providerMediaId } = await provider.uploadMedia(creds, {
      content: pdf,
      mimeType: "application/pdf",
      filename: "INV-2041.pdf",
    });
    expect(providerMediaId).toMatch(/^\d{16}$/);

    await provider.sendMessage(
      creds,
      templateSend("invoice_ready", "en", {
        header: { type: "document", mediaId: providerMediaId, filename: "INV-2041.pdf" },
        body: ["INV-2041"],
      }),
    );

    const [payload] = (await sentPayloads()) as { template: { components: unknown } }[];
    expect(payload?.template.components).toEqual([
      {
        type: "header",
        parameters: [{ type: "document", document: { id: providerMediaId, filename: "INV-2041.pdf" } }],
      },
      { type: "body", parameters: [{ type: "text", text: "INV-2041" }] },
    ]);
  });

  test("a video header by link", async () => {
    await provider.sendMessage(
      creds,
      templateSend("delivery_video", "en", {
        header: { type: "video", link: "https://example.com/samples/packing.mp4" },
        body: ["A-1001"],
      }),
    );

    const [payload] = (await sentPayloads()) as { template: { components: unknown[] } }[];
    expect(payload?.template.components[0]).toEqual({
      type: "header",
      parameters: [{ type: "video", video: { link: "https://example.com/samples/packing.mp4" } }],
    });
  });
});

describe("templates", () => {
  test("lists the whole catalogue, PENDING and REJECTED included, as the provider reports it", async () => {
    const templates = await provider.listTemplates(creds);

    expect(templates).toHaveLength(9);
    expect(
      templates.map((template) => [template.name, template.language, template.status, template.category]),
    ).toEqual([
      ["order_shipped", "en", "APPROVED", "UTILITY"],
      ["order_shipped", "de", "APPROVED", "UTILITY"],
      ["invoice_ready", "en", "APPROVED", "UTILITY"],
      ["delivery_video", "en", "APPROVED", "UTILITY"],
      ["appointment_reminder", "en", "APPROVED", "UTILITY"],
      ["welcome", "en", "APPROVED", "MARKETING"],
      ["summer_sale", "en", "PENDING", "MARKETING"],
      ["old_promo", "en", "REJECTED", "MARKETING"],
      ["login_code", "en", "APPROVED", "AUTHENTICATION"],
    ]);
    // A template as the simulator's catalogue has it: Graph's id as the providerId, the components
    // (a TEXT header, a body, a URL button, each with its example) as they came.
    const { id, ...reminder } = TEMPLATE_CATALOGUE.find(
      (template) => template.name === "appointment_reminder",
    )!;
    expect(templates[4]).toEqual({ providerId: id, ...reminder });
  });

  test("follows paging until the last page", async () => {
    const requested: string[] = [];
    // Real HTTP still; only the page size is shrunk so that the catalogue spans three pages.
    const paged = createWhatsAppProvider({
      baseUrl: simulatorUrl,
      fetch: (url, init) => {
        const smallPages = url.replace("limit=100", "limit=3");
        requested.push(smallPages);
        return fetch(smallPages, init);
      },
    });

    const templates = await paged.listTemplates(creds);

    expect(templates.map((template) => template.providerId)).toEqual(
      TEMPLATE_CATALOGUE.map((template) => template.id),
    );
    expect(requested).toHaveLength(3);
    expect(requested[0]).toStartWith(`${simulatorUrl}/v21.0/${creds.wabaId}/message_templates?`);
  });
});

describe("failures", () => {
  test("a template the provider does not have is not retryable", async () => {
    const error = await providerError(provider.sendMessage(creds, templateSend("nope", "en")));

    expect(error.name).toBe("ProviderError");
    expect(error.code).toBe("template_not_found");
    expect(error.retryable).toBe(false);
    expect(error.providerCode).toBe(132001);
    expect(error.httpStatus).toBe(400);
    expect(error.message).toContain("nope");
  });

  test("a template that is not approved is not found", async () => {
    const error = await providerError(
      provider.sendMessage(creds, templateSend("summer_sale", "en", { body: ["20%"] })),
    );

    expect([error.code, error.retryable]).toEqual(["template_not_found", false]);
  });

  test("a wrong number of values is a template mismatch", async () => {
    const error = await providerError(
      provider.sendMessage(creds, templateSend("order_shipped", "de", { body: ["Ana"] })),
    );

    expect(error.code).toBe("template_mismatch");
    expect(error.retryable).toBe(false);
    expect(error.providerCode).toBe(132000);
    expect(error.message).toContain("body: expected 2 parameters, got 1");
    expect(await sentPayloads()).toEqual([]);
  });

  test("throttling (130429) is retryable", async () => {
    await failNext(130429);
    const error = await providerError(provider.sendMessage(creds, HI));

    expect(verdict(error)).toEqual(["provider_rate_limited", true, 429, 130429]);
    // The failure was used up: the next send goes through.
    await provider.sendMessage(creds, HI);
    expect(await sentPayloads()).toHaveLength(1);
  });

  test("an undeliverable recipient (131026) is permanent", async () => {
    await failNext(131026);
    const error = await providerError(provider.sendMessage(creds, HI));

    expect(verdict(error)).toEqual(["recipient_invalid", false, 400, 131026]);
  });

  test("a provider-side failure (131000) is retryable", async () => {
    await failNext(131000);
    const error = await providerError(provider.sendMessage(creds, HI));

    expect(verdict(error)).toEqual(["provider_unavailable", true, 500, 131000]);
  });

  test("a missing access token is an auth failure", async () => {
    const error = await providerError(provider.sendMessage({ ...creds, accessToken: "" }, HI));

    expect(verdict(error)).toEqual(["provider_auth_failed", false, 401, 190]);
  });

  test("a provider that does not answer in time is retryable", async () => {
    const slow = createWhatsAppProvider({ baseUrl: `http://127.0.0.1:${silentServer.port}`, timeoutMs: 100 });
    const started = performance.now();
    const error = await providerError(slow.sendMessage(creds, HI));

    expect(verdict(error)).toEqual(["provider_unavailable", true, undefined, undefined]);
    expect(error.message).toContain("100 ms");
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  test("a provider that refuses connections is retryable", async () => {
    const closed = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
    const port = closed.port;
    await closed.stop(true);
    const unreachable = createWhatsAppProvider({ baseUrl: `http://127.0.0.1:${port}` });

    const error = await providerError(unreachable.listTemplates(creds));

    expect([error.code, error.retryable]).toEqual(["provider_unavailable", true]);
  });
});

describe("normalizeProviderError", () => {
  test.each([
    [4, "provider_rate_limited", true],
    [80007, "provider_rate_limited", true],
    [131048, "provider_rate_limited", true],
    [131056, "provider_rate_limited", true],
    [1, "provider_unavailable", true],
    [2, "provider_unavailable", true],
    [133010, "recipient_invalid", false],
    [132005, "template_mismatch", false],
    [132007, "template_mismatch", false],
    [132012, "template_mismatch", false],
    [131047, "reengagement_required", false],
    [131050, "recipient_opted_out", false],
    [100, "parameter_invalid", false],
    [131008, "parameter_invalid", false],
    [131009, "parameter_invalid", false],
    [190, "provider_auth_failed", false],
  ] as const)("WhatsApp %d -> %s (retryable: %p)", (graphCode, code, retryable) => {
    expect(normalizeProviderError(graphCode, "Something", 400)).toEqual({
      code,
      retryable,
      message: `Something (WhatsApp error ${graphCode})`,
      providerCode: graphCode,
    });
  });

  test("an unknown code is retried only when the HTTP status blames the provider", () => {
    expect(normalizeProviderError(999999, "Odd", 400)).toMatchObject({
      code: "provider_error",
      retryable: false,
    });
    expect(normalizeProviderError(999999, "Odd")).toMatchObject({ code: "provider_error", retryable: false });
    expect(normalizeProviderError(999999, "Odd", 503)).toMatchObject({
      code: "provider_unavailable",
      retryable: true,
    });
    expect(normalizeProviderError(undefined, "HTTP 502", 502)).toEqual({
      code: "provider_unavailable",
      retryable: true,
      message: "HTTP 502",
    });
    expect(normalizeProviderError(undefined, "HTTP 429", 429)).toMatchObject({
      code: "provider_rate_limited",
      retryable: true,
    });
  });
});

describe("webhook signatures", () => {
  const secret = "signature-secret";
  const body = JSON.stringify({ object: "whatsapp_business_account", entry: [] });

  test("a signature made with the secret verifies", () => {
    const header = signPayload(body, secret);

    expect(header).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(verifySignature(body, header, secret)).toBe(true);
    expect(verifySignature(new TextEncoder().encode(body), header, secret)).toBe(true);
  });

  test("rejects a tampered body, a wrong secret, a missing or malformed header", () => {
    const header = signPayload(body, secret);

    expect(verifySignature(`${body} `, header, secret)).toBe(false);
    expect(verifySignature(body, header, "another-secret")).toBe(false);
    expect(verifySignature(body, undefined, secret)).toBe(false);
    expect(verifySignature(body, null, secret)).toBe(false);
    expect(verifySignature(body, "", secret)).toBe(false);
    expect(verifySignature(body, header.slice("sha256=".length), secret)).toBe(false);
    expect(verifySignature(body, `sha1=${header.slice("sha256=".length)}`, secret)).toBe(false);
    expect(verifySignature(body, header.slice(0, -2), secret)).toBe(false);
  });
});
