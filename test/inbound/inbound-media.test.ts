import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { ProviderError } from "../../src/channel/provider.ts";
import { createWhatsAppProvider } from "../../src/channel/whatsapp.ts";
import { finalizeInbound } from "../../src/inbound/finalize.ts";
import { safeFilename } from "../../src/panel/inbound-media.ts";
import type { SenderRow } from "../../src/senders/repository.ts";
import { SAMPLE_MEDIA } from "../../src/simulator/sample-media.ts";
import { addSender, customerWrites, type InboundFields, storeMessage } from "../support/fixtures.ts";
import { createTestEnv, type TestEnv } from "../support/index.ts";
import { type PanelClient, signedInClient } from "../support/panel.ts";

/**
 * Issue 24: a received picture or file can be opened from the panel. The media id is kept with the
 * message; the panel fetches the file from the provider (the real simulator over HTTP, Graph's two
 * calls) with the receiving sender's token, for the signed-in tenant only.
 */

let env: TestEnv;
let client: PanelClient;
let other: PanelClient;
let sender: SenderRow;
const PHONE_NUMBER_ID = "671000000000001";
const OTHER_PHONE_NUMBER_ID = "671000000000002";
const CUSTOMER = "4915167000001";
const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { anonymous: 10_000, token: 10_000 } });
  const signedIn = await signedInClient(env.app, env.deps, { tenantName: "Media Shop" });
  client = signedIn.client;
  sender = await addSender(env, signedIn.tenant.id, {
    phoneNumberId: PHONE_NUMBER_ID,
    wabaId: "771000000000001",
  });
  const second = await signedInClient(env.app, env.deps, { tenantName: "Other Shop" });
  other = second.client;
  await addSender(env, second.tenant.id, {
    phoneNumberId: OTHER_PHONE_NUMBER_ID,
    accessToken: "sim-token-2",
  });
});
afterAll(() => env.close());

/** The customer sends something through the simulator; finalize runs; the stored message. */
async function received(fields: Omit<InboundFields, "from">, phoneNumberId = PHONE_NUMBER_ID) {
  const id = await customerWrites(env, phoneNumberId, { from: CUSTOMER, name: "Ana", ...fields });
  const outcome = await finalizeInbound(env.deps.db, env.clock, id);
  expect(outcome?.created).toBe(true);
  const row = await env.deps.db
    .selectFrom("messages")
    .select(["id", "contact_id", "media_id", "media_type", "media_filename", "sender_id"])
    .where("id", "=", outcome!.messageId)
    .executeTakeFirstOrThrow();
  return { ...row, id: row.id!, path: `/panel/conversations/${row.contact_id}/messages/${row.id}/media` };
}

async function fetchBytes(path: string, panel: PanelClient = client) {
  const headers: Record<string, string> = {
    cookie: [...panel.cookies].map(([name, value]) => `${name}=${value}`).join("; "),
  };
  const response = await env.app.handle(new Request(`http://localhost${path}`, { headers }));
  return { response, bytes: new Uint8Array(await response.arrayBuffer()) };
}

describe("the media id is kept", () => {
  test("a received image, document, video and audio store the provider's media id; a text none", async () => {
    for (const type of ["image", "document", "video", "audio"] as const) {
      const message = await received({ type });
      expect(message.media_type).toBe(type);
      expect(message.media_id).toMatch(/^\d+$/);
      expect(message.sender_id).toBe(sender.id);
    }
    const text = await received({ type: "text", text: "hello" });
    expect(text.media_id).toBeNull();
  });
});

describe("GET /panel/conversations/:contactId/messages/:messageId/media", () => {
  test("an image: its bytes inline, with the provider's type and inert headers", async () => {
    const message = await received({ type: "image", caption: "the box" });
    const { response, bytes } = await fetchBytes(message.path);
    expect(response.status).toBe(200);
    expect([...bytes.slice(0, 8)]).toEqual(PNG_SIGNATURE);
    expect(bytes).toEqual(new Uint8Array(SAMPLE_MEDIA.image.bytes));
    expect(response.headers.get("content-type")).toBe("image/png");
    expect(response.headers.get("content-disposition")).toStartWith("inline;");
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");
    expect(response.headers.get("content-security-policy")).toBe("sandbox; default-src 'none'");
    expect(response.headers.get("cache-control")).toBe("private, max-age=300");
  });

  test("given bytes come back exactly, and the panel shows the image as a thumbnail linking to it", async () => {
    const jpeg = new Uint8Array(3000).map((_, i) => (i * 7) % 256);
    jpeg.set([0xff, 0xd8, 0xff], 0);
    const message = await received({
      type: "image",
      media_base64: Buffer.from(jpeg).toString("base64"),
      mime_type: "image/jpeg",
    });
    const { response, bytes } = await fetchBytes(message.path);
    expect(response.headers.get("content-type")).toBe("image/jpeg");
    expect(createHash("sha256").update(bytes).digest("hex")).toBe(
      createHash("sha256").update(jpeg).digest("hex"),
    );

    const page = await client.get(`/panel/conversations/${message.contact_id}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain(
      `<a href="${message.path}"><img src="${message.path}" loading="lazy" alt="Image from Ana"></a>`,
    );
    // The panel's own CSP lets the page load it.
    expect(page.headers.get("content-security-policy")).toContain("img-src 'self'");
  });

  test("a document is an attachment under its (sanitized) name, and the panel links a download", async () => {
    const message = await received({ type: "document", filename: "invoice.pdf" });
    const { response, bytes } = await fetchBytes(message.path);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/pdf");
    expect(response.headers.get("content-disposition")).toBe(
      `attachment; filename="invoice.pdf"; filename*=UTF-8''invoice.pdf`,
    );
    expect(new TextDecoder().decode(bytes.slice(0, 5))).toBe("%PDF-");
    expect(response.headers.get("x-content-type-options")).toBe("nosniff");

    const page = await client.get(`/panel/conversations/${message.contact_id}`);
    expect(page.text).toMatch(
      new RegExp(`<a class="message-download" href="${message.path}" download>.*Download invoice\\.pdf</a>`),
    );

    const hostile = await received({ type: "document", filename: '../../etc/"passwd";\r\n.pdf' });
    const answer = await fetchBytes(hostile.path);
    const disposition = answer.response.headers.get("content-disposition") ?? "";
    expect(disposition).toStartWith('attachment; filename="');
    expect(disposition).not.toContain("/");
    expect(disposition).not.toMatch(/[\r\n]/);
  });

  test("a video and an audio are downloads; a nameless one is named by its type", async () => {
    const video = await received({ type: "video" });
    const answer = await fetchBytes(video.path);
    expect(answer.response.headers.get("content-type")).toBe("video/mp4");
    expect(answer.response.headers.get("content-disposition")).toStartWith(
      'attachment; filename="video.mp4"',
    );
    const audio = await received({ type: "audio" });
    const voice = await fetchBytes(audio.path);
    expect(voice.response.headers.get("content-disposition")).toStartWith('attachment; filename="audio.ogg"');
  });

  test("an image type a browser should not render inline (SVG) is an attachment", async () => {
    const svg = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>';
    const message = await received({
      type: "image",
      media_base64: Buffer.from(svg).toString("base64"),
      mime_type: "image/svg+xml",
    });
    const { response } = await fetchBytes(message.path);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-disposition")).toStartWith("attachment;");
    expect(response.headers.get("content-security-policy")).toBe("sandbox; default-src 'none'");
  });

  test("another tenant's message, a message without media, an outbound message: 404", async () => {
    const image = await received({ type: "image" });
    const theirs = await fetchBytes(image.path, other);
    expect(theirs.response.status).toBe(404);
    expect(theirs.response.headers.get("content-type")).toContain("text/html");

    const text = await received({ type: "text", text: "no media" });
    expect((await fetchBytes(text.path)).response.status).toBe(404);
    expect(
      (await fetchBytes(`/panel/conversations/${image.contact_id}/messages/msg_nope/media`)).response.status,
    ).toBe(404);

    // A send with media (even one that names a media id) is not fetched: its placeholder stays.
    const outboundId = await storeMessage(env.deps.db, {
      tenantId: sender.tenant_id,
      senderId: sender.id,
      contactId: image.contact_id,
      type: "template",
      preview: "[document: terms.pdf]",
      text: null,
      media: { type: "document", filename: "terms.pdf", id: image.media_id },
    });
    const outbound = `/panel/conversations/${image.contact_id}/messages/${outboundId}/media`;
    expect((await fetchBytes(outbound)).response.status).toBe(404);
    const page = await client.get(`/panel/conversations/${image.contact_id}`);
    expect(page.text).not.toContain(outbound);
    expect(page.text).toContain("document: terms.pdf");

    // The other tenant's own image opens for them, not for us.
    const mine = await received({ type: "image" }, OTHER_PHONE_NUMBER_ID);
    expect((await fetchBytes(mine.path, other)).response.status).toBe(200);
    expect((await fetchBytes(mine.path)).response.status).toBe(404);
  });

  test("signed out: to the sign-in page", async () => {
    const image = await received({ type: "image" });
    const response = await env.app.handle(new Request(`http://localhost${image.path}`));
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toStartWith("/panel/sign-in");
  });

  test("media the provider no longer has: a readable error page, not a 500", async () => {
    const image = await received({ type: "image" });
    // The simulator forgets its media (as WhatsApp lets received media expire).
    expect((await fetch(`${env.simulatorUrl}/_sim/reset`, { method: "POST" })).status).toBe(200);
    const { response, bytes } = await fetchBytes(image.path);
    expect(response.status).toBe(502);
    expect(response.headers.get("content-type")).toContain("text/html");
    const text = new TextDecoder().decode(bytes);
    expect(text).toContain("The picture could not be fetched");
    expect(text).toContain("may have expired");
  });
});

describe("the WhatsApp adapter's download", () => {
  const creds = { phoneNumberId: PHONE_NUMBER_ID, wabaId: "771000000000001", accessToken: "sim-token" };

  test("the two Graph calls, the token on both; refused above the cap", async () => {
    const message = await received({
      type: "document",
      media_base64: Buffer.from(new Uint8Array(2048)).toString("base64"),
      mime_type: "application/pdf",
    });
    const seen: { url: string; authorization: string | null }[] = [];
    const provider = createWhatsAppProvider({
      baseUrl: env.simulatorUrl,
      fetch: (url, init) => {
        seen.push({ url, authorization: new Headers(init.headers).get("authorization") });
        return fetch(url, init);
      },
    });
    const media = await provider.downloadMedia(creds, message.media_id!);
    expect(media.bytes.byteLength).toBe(2048);
    expect(media.contentType).toBe("application/pdf");
    expect(seen).toHaveLength(2);
    expect(seen[0]?.url).toBe(`${env.simulatorUrl}/v21.0/${message.media_id}`);
    expect(seen.every((call) => call.authorization === "Bearer sim-token")).toBe(true);

    const capped = createWhatsAppProvider({ baseUrl: env.simulatorUrl, mediaLimitBytes: 1024 });
    const refused = await capped.downloadMedia(creds, message.media_id!).catch((error) => error);
    expect(refused).toBeInstanceOf(ProviderError);
    expect((refused as ProviderError).message).toContain("2048 bytes");
  });

  test("a body longer than it said is cut off at the cap", async () => {
    const provider = createWhatsAppProvider({
      baseUrl: "http://graph.invalid",
      mediaLimitBytes: 100,
      fetch: async (url) =>
        url.includes("attachments")
          ? new Response(
              new ReadableStream({
                start(controller) {
                  for (let i = 0; i < 5; i++) controller.enqueue(new Uint8Array(50));
                  controller.close();
                },
              }),
              { headers: { "content-type": "image/png" } },
            )
          : Response.json({
              url: "http://graph.invalid/attachments?mid=1",
              mime_type: "image/png",
              file_size: 10,
            }),
    });
    const refused = await provider.downloadMedia(creds, "1").catch((error) => error);
    expect(refused).toBeInstanceOf(ProviderError);
    expect((refused as ProviderError).retryable).toBe(false);
  });

  test("an unknown media id is the provider's error", async () => {
    const provider = createWhatsAppProvider({ baseUrl: env.simulatorUrl });
    const refused = await provider.downloadMedia(creds, "123").catch((error) => error);
    expect(refused).toBeInstanceOf(ProviderError);
    expect((refused as ProviderError).httpStatus).toBe(400);
  });
});

test("safeFilename keeps a plain name and defuses the rest", () => {
  expect(safeFilename("invoice.pdf", "x")).toBe("invoice.pdf");
  expect(safeFilename("../../etc/passwd", "x")).toBe("passwd");
  expect(safeFilename("C:\\Users\\a\\report.pdf", "x")).toBe("report.pdf");
  expect(safeFilename("evil\u202Efdp.exe", "x")).toBe("evilfdp.exe");
  expect(safeFilename('a"b;c\r\n.pdf', "x")).toBe("a_b_c.pdf");
  expect(safeFilename("...", "file.bin")).toBe("file.bin");
  expect(safeFilename(null, "document.pdf")).toBe("document.pdf");
  expect(safeFilename("Rechnung März.pdf", "x")).toBe("Rechnung März.pdf");
});
