import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { createWhatsAppProvider } from "../../src/channel/whatsapp.ts";
import { epochSeconds } from "../../src/clock.ts";
import { MEDIA_BODY_LIMIT } from "../../src/http/body.ts";
import { randomBase62 } from "../../src/ids.ts";
import { findUsableMedia } from "../../src/media/service.ts";
import {
  insertSender,
  type SenderRow,
  senderCredentials,
  setSenderActive,
} from "../../src/senders/repository.ts";
import {
  type CallResult,
  call,
  createTenantWithApp,
  createTestEnv,
  expectApiError,
  getToken,
  type TestEnv,
} from "../support/index.ts";

const MB = 1024 * 1024;
const DAY_SECONDS = 24 * 60 * 60;

const PDF = "%PDF-1.7\n";
const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52];
const JPEG = [0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00];

let env: TestEnv;
/** A tenant with exactly one active sender, and tokens of its application. */
let main: { tenantId: string; sender: SenderRow; token: string; readOnlyToken: string };

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  const created = await createTenantWithApp(env.deps);
  main = {
    tenantId: created.tenant.id,
    sender: await addSender(created.tenant.id),
    token: await getToken(env.app, created.clientId, created.clientSecret),
    readOnlyToken: await getToken(env.app, created.clientId, created.clientSecret, "messaging:read"),
  };
});
afterAll(() => env.close());

async function addSender(tenantId: string): Promise<SenderRow> {
  return insertSender(env.deps.db, env.config.providerTokenKey, {
    tenantId,
    phoneNumber: "+4915112345678",
    providerPhoneNumberId: `pn-${randomBase62(12)}`,
    wabaId: "waba-1",
    accessToken: "sender-access-token",
  });
}

/** Another tenant with its own application; its senders are added by the test. */
async function otherTenant() {
  const created = await createTenantWithApp(env.deps, { name: "Other" });
  return {
    tenantId: created.tenant.id,
    token: await getToken(env.app, created.clientId, created.clientSecret),
  };
}

/** `size` bytes that start with `head` (a file signature) and are zero after it. */
function fileBytes(head: string | number[], size: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(size);
  bytes.set(typeof head === "string" ? new TextEncoder().encode(head) : head);
  return bytes;
}

/** An ISO-BMFF `ftyp` box: size, "ftyp", major brand, minor version, compatible brands. */
function ftyp(major: string, compatible: string[]): number[] {
  const brands = [major, "\0\0\0\0", ...compatible].join("");
  const size = 8 + brands.length;
  return [0, 0, 0, size, ...Array.from(`ftyp${brands}`, (char) => char.charCodeAt(0))];
}

interface UploadFields {
  file?: { bytes: Uint8Array<ArrayBuffer>; name: string; type?: string };
  sender?: string;
  filename?: string;
}

function uploadForm(fields: UploadFields): FormData {
  const form = new FormData();
  if (fields.file) {
    const { bytes, name, type } = fields.file;
    form.append("file", new Blob([bytes], { type: type ?? "application/octet-stream" }), name);
  }
  if (fields.sender !== undefined) form.append("sender", fields.sender);
  if (fields.filename !== undefined) form.append("filename", fields.filename);
  return form;
}

function upload(fields: UploadFields, token = main.token): Promise<CallResult> {
  return call(env.app, "POST", "/v2/media", { rawBody: uploadForm(fields), token });
}

const mediaId = expect.stringMatching(/^med_[0-9A-Za-z]{22}$/);

describe("POST /media", () => {
  test("a PDF is a document: 201 with the whole Media object, stored with the provider's media id", async () => {
    const now = env.clock.now();
    const result = await upload({ file: { bytes: fileBytes(PDF, 2048), name: "invoice-42.pdf" } });
    expect(result.status).toBe(201);
    expect(result.body).toEqual({
      object: "media",
      id: mediaId,
      type: "document",
      filename: "invoice-42.pdf",
      mime_type: "application/pdf",
      created: epochSeconds(now),
      expires_at: new Date(now.getTime() + 30 * DAY_SECONDS * 1000).toISOString(),
    });

    const row = await env.deps.db
      .selectFrom("media")
      .selectAll()
      .where("id", "=", result.body.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({
      id: result.body.id,
      tenant_id: main.tenantId,
      sender_id: main.sender.id,
      type: "document",
      mime_type: "application/pdf",
      filename: "invoice-42.pdf",
      size_bytes: 2048,
      provider_media_id: expect.stringMatching(/^\d+$/),
      created_at: now,
      expires_at: new Date(now.getTime() + 30 * DAY_SECONDS * 1000),
    });
    // The provider knows the id for this sender's number: a template header may use it.
    const sent = await env.deps.provider.sendMessage(
      senderCredentials(env.config.providerTokenKey, main.sender),
      {
        kind: "template",
        to: "+4917612345678",
        name: "invoice_ready",
        language: "en",
        components: { header: { type: "document", mediaId: row.provider_media_id }, body: ["INV-42"] },
      },
    );
    expect(sent.providerMessageId).toStartWith("wamid.");
  });

  test("the filename field names the file", async () => {
    const result = await upload({
      file: { bytes: fileBytes(PDF, 100), name: "scan0001.pdf" },
      filename: "Invoice March.pdf",
    });
    expect(result.status).toBe(201);
    expect(result.body.filename).toBe("Invoice March.pdf");
  });

  test("the type comes from the content: a PNG named invoice.pdf and sent as application/pdf is an image", async () => {
    const result = await upload({
      file: { bytes: fileBytes(PNG, 1000), name: "invoice.pdf", type: "application/pdf" },
    });
    expect(result.status).toBe(201);
    expect(result.body).toMatchObject({ type: "image", mime_type: "image/png", filename: null });
  });

  test("JPEG is an image", async () => {
    const result = await upload({ file: { bytes: fileBytes(JPEG, 1000), name: "photo.jpg" } });
    expect(result.status).toBe(201);
    expect(result.body).toMatchObject({ type: "image", mime_type: "image/jpeg", filename: null });
  });

  test("MP4 and 3GPP are video, by their ftyp brands", async () => {
    const cases: [number[], string][] = [
      [ftyp("isom", ["isom", "iso2", "avc1", "mp41"]), "video/mp4"],
      [ftyp("mp42", ["mp42", "isom"]), "video/mp4"],
      [ftyp("3gp5", ["3gp5", "isom"]), "video/3gpp"],
      [ftyp("3g2a", ["3g2a"]), "video/3gpp"],
      // An unknown major brand falls back to a known compatible one.
      [ftyp("XAVC", ["XAVC", "mp42", "iso2"]), "video/mp4"],
    ];
    for (const [head, mimeType] of cases) {
      const result = await upload({ file: { bytes: fileBytes(head, 4096), name: "clip.bin" } });
      expect({ status: result.status, type: result.body.type, mime: result.body.mime_type }).toEqual({
        status: 201,
        type: "video",
        mime: mimeType,
      });
    }
  });

  test("anything else is unsupported_media_type, whatever its name and Content-Type", async () => {
    const text = await upload({
      file: { bytes: fileBytes("hello, this is text\n", 20), name: "report.pdf", type: "application/pdf" },
    });
    expectApiError(text, 400, "unsupported_media_type", "file");
    const quickTime = await upload({
      file: { bytes: fileBytes(ftyp("qt  ", ["qt  "]), 512), name: "a.mov" },
    });
    expectApiError(quickTime, 400, "unsupported_media_type", "file");
    const empty = await upload({ file: { bytes: new Uint8Array(0), name: "empty.pdf" } });
    expectApiError(empty, 400, "unsupported_media_type", "file");
  });

  test("an image over 5 MB is file_too_large, with the image limit in the message", async () => {
    const atLimit = await upload({ file: { bytes: fileBytes(PNG, 5 * MB), name: "big.png" } });
    expect(atLimit.status).toBe(201);
    const over = await upload({ file: { bytes: fileBytes(PNG, 5 * MB + 1), name: "big.png" } });
    expectApiError(over, 400, "file_too_large", "file");
    expect(over.body.error.message).toContain("image files may be at most 5 MB");
  });

  test("a document over 16 MB is file_too_large, with the document limit in the message", async () => {
    const over = await upload({ file: { bytes: fileBytes(PDF, 16 * MB + 1), name: "big.pdf" } });
    expectApiError(over, 400, "file_too_large", "file");
    expect(over.body.error.message).toContain("document files may be at most 16 MB");
  });

  test("a missing file is parameter_missing; a text field named file is parameter_invalid", async () => {
    expectApiError(await upload({ filename: "x.pdf" }), 400, "parameter_missing", "file");
    const form = new FormData();
    form.append("file", "%PDF-1.7 not a file part");
    const textField = await call(env.app, "POST", "/v2/media", { rawBody: form, token: main.token });
    expectApiError(textField, 400, "parameter_invalid", "file");
  });

  test("unknown and repeated fields are refused", async () => {
    const unknown = uploadForm({ file: { bytes: fileBytes(PDF, 100), name: "a.pdf" } });
    unknown.append("caption", "hello");
    expectApiError(
      await call(env.app, "POST", "/v2/media", { rawBody: unknown, token: main.token }),
      400,
      "parameter_unknown",
      "caption",
    );
    const repeated = uploadForm({ file: { bytes: fileBytes(PDF, 100), name: "a.pdf" } });
    repeated.append("file", new Blob([fileBytes(PDF, 100)]), "b.pdf");
    expectApiError(
      await call(env.app, "POST", "/v2/media", { rawBody: repeated, token: main.token }),
      400,
      "parameter_invalid",
      "file",
    );
  });

  test("a body that is not multipart/form-data is invalid_content_type", async () => {
    const json = await call(env.app, "POST", "/v2/media", { body: { file: "x" }, token: main.token });
    expectApiError(json, 400, "invalid_content_type", null);
    const none = await call(env.app, "POST", "/v2/media", { token: main.token });
    expectApiError(none, 400, "invalid_content_type", null);
    const text = await call(env.app, "POST", "/v2/media", {
      rawBody: "%PDF-1.7",
      headers: { "content-type": "application/pdf" },
      token: main.token,
    });
    expectApiError(text, 400, "invalid_content_type", null);
  });

  test("a broken multipart body is parameter_invalid", async () => {
    const result = await call(env.app, "POST", "/v2/media", {
      rawBody: "--nope\r\nnot a part",
      headers: { "content-type": "multipart/form-data; boundary=xyz" },
      token: main.token,
    });
    expectApiError(result, 400, "parameter_invalid", null);
  });
});

describe("POST /media: which sender", () => {
  test("with several active senders, a sender must be named; the named one gets the upload", async () => {
    const other = await otherTenant();
    const first = await addSender(other.tenantId);
    await addSender(other.tenantId);
    const file = { bytes: fileBytes(PDF, 100), name: "a.pdf" };

    expectApiError(await upload({ file }, other.token), 400, "parameter_missing", "sender");
    const named = await upload({ file, sender: first.id }, other.token);
    expect(named.status).toBe(201);
    const row = await env.deps.db
      .selectFrom("media")
      .select("sender_id")
      .where("id", "=", named.body.id)
      .executeTakeFirstOrThrow();
    expect(row.sender_id).toBe(first.id);
  });

  test("another tenant's sender, an unknown one, or a flipped-case id is 404", async () => {
    const other = await otherTenant();
    const foreign = await addSender(other.tenantId);
    const file = { bytes: fileBytes(PDF, 100), name: "a.pdf" };
    expectApiError(await upload({ file, sender: foreign.id }), 404, "resource_missing", "sender");
    expectApiError(await upload({ file, sender: "snd_doesnotexist" }), 404, "resource_missing", "sender");
    const flipped = main.sender.id.replace(/[a-zA-Z]/, (c) =>
      c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase(),
    );
    expect(flipped).not.toBe(main.sender.id);
    expectApiError(await upload({ file, sender: flipped }), 404, "resource_missing", "sender");
  });

  test("no active sender is parameter_missing; a named inactive one is parameter_invalid", async () => {
    const other = await otherTenant();
    const file = { bytes: fileBytes(PDF, 100), name: "a.pdf" };
    const none = await upload({ file }, other.token);
    expectApiError(none, 400, "parameter_missing", "sender");
    expect(none.body.error.message).toContain("no active sender");

    const retired = await addSender(other.tenantId);
    await setSenderActive(env.deps.db, retired.id, false);
    const inactive = await upload({ file, sender: retired.id }, other.token);
    expectApiError(inactive, 400, "parameter_invalid", "sender");
    expect(inactive.body.error.message).toContain("inactive");
  });
});

describe("POST /media: access and provider failures", () => {
  test("a read-only token is 403 and no token is 401, before the body is looked at", async () => {
    const file = { bytes: fileBytes(PDF, 100), name: "a.pdf" };
    const readOnly = await upload({ file }, main.readOnlyToken);
    expectApiError(readOnly, 403, "insufficient_scope", null);
    expect(readOnly.headers.get("www-authenticate")).toContain('scope="messaging:send"');
    expectApiError(await upload({ file: undefined }, main.readOnlyToken), 403, "insufficient_scope", null);
    const anonymous = await call(env.app, "POST", "/v2/media", { rawBody: uploadForm({ file }) });
    expectApiError(anonymous, 401, "unauthorized", null);
    const anonymousJson = await call(env.app, "POST", "/v2/media", { body: {} });
    expectApiError(anonymousJson, 401, "unauthorized", null);
  });

  test("a provider that cannot be reached is 503 with Retry-After", async () => {
    const unreachable = createApp({
      ...env.deps,
      provider: createWhatsAppProvider({ baseUrl: "http://127.0.0.1:9", timeoutMs: 2000 }),
    });
    const result = await call(unreachable, "POST", "/v2/media", {
      rawBody: uploadForm({ file: { bytes: fileBytes(PDF, 100), name: "a.pdf" } }),
      token: main.token,
    });
    expectApiError(result, 503, "service_unavailable", null);
    expect(result.headers.get("retry-after")).toBe("5");
  });

  test("a provider refusal is parameter_invalid on file, with the provider's message", async () => {
    const other = await otherTenant();
    // The simulator, like Graph, refuses a request without a usable access token (error 190).
    await insertSender(env.deps.db, env.config.providerTokenKey, {
      tenantId: other.tenantId,
      phoneNumber: "+4915112345679",
      providerPhoneNumberId: `pn-${randomBase62(12)}`,
      wabaId: "waba-1",
      accessToken: "",
    });
    const result = await upload({ file: { bytes: fileBytes(PDF, 100), name: "a.pdf" } }, other.token);
    expectApiError(result, 400, "parameter_invalid", "file");
    expect(result.body.error.message).toContain("WhatsApp error 190");
  });
});

describe("POST /media: body limits", () => {
  /** A multipart body that streams without Content-Length; counts what the server pulled. */
  function chunkedUpload(fileSize: number) {
    const boundary = "media-test-boundary";
    const encoder = new TextEncoder();
    const head = encoder.encode(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.pdf"\r\nContent-Type: application/pdf\r\n\r\n${PDF}`,
    );
    const tail = encoder.encode(`\r\n--${boundary}--\r\n`);
    const chunk = new Uint8Array(256 * 1024);
    const pulled = { bytes: 0 };
    let remaining = fileSize - PDF.length;
    let started = false;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        let next: Uint8Array;
        if (!started) {
          started = true;
          next = head;
        } else if (remaining > 0) {
          next = remaining >= chunk.length ? chunk : chunk.subarray(0, remaining);
          remaining -= next.length;
        } else {
          controller.enqueue(tail);
          controller.close();
          return;
        }
        pulled.bytes += next.length;
        controller.enqueue(next);
      },
    });
    return { body, pulled, contentType: `multipart/form-data; boundary=${boundary}` };
  }

  test("a chunked body past the limit is refused while it streams, never buffered whole", async () => {
    const { body, pulled, contentType } = chunkedUpload(MEDIA_BODY_LIMIT + 8 * MB);
    const response = await env.app.handle(
      new Request("http://localhost/v2/media", {
        method: "POST",
        body,
        headers: { "content-type": contentType, authorization: `Bearer ${main.token}` },
        duplex: "half",
      } as RequestInit),
    );
    expect(response.status).toBe(400);
    expect((await response.json()).error).toMatchObject({ code: "file_too_large", param: "file" });
    expect(pulled.bytes).toBeLessThan(MEDIA_BODY_LIMIT + 2 * MB);
  });

  test("over HTTP: chunked and declared bodies past the limit both get the envelope", async () => {
    const chunked = chunkedUpload(MEDIA_BODY_LIMIT + MB);
    const overChunked = await fetch(`${env.apiUrl}/v2/media`, {
      method: "POST",
      body: chunked.body,
      headers: { "content-type": chunked.contentType, authorization: `Bearer ${main.token}` },
    });
    expect(overChunked.status).toBe(400);
    expect((await overChunked.json()).error).toMatchObject({ code: "file_too_large", param: "file" });

    // A declared Content-Length over the limit is refused by the pipeline before routing.
    const declared = await fetch(`${env.apiUrl}/v2/media`, {
      method: "POST",
      body: uploadForm({ file: { bytes: fileBytes(PDF, MEDIA_BODY_LIMIT + 1), name: "big.pdf" } }),
      headers: { authorization: `Bearer ${main.token}` },
    });
    expect(declared.status).toBe(400);
    expect((await declared.json()).error).toMatchObject({ code: "file_too_large", param: "file" });
  });
});

describe("findUsableMedia", () => {
  test("the uploading sender's handle is usable; another tenant's or sender's is 404; after 30 days media_expired", async () => {
    const uploaded = await upload({ file: { bytes: fileBytes(JPEG, 100), name: "a.jpg" } });
    expect(uploaded.status).toBe(201);
    const handle: string = uploaded.body.id;
    const { db } = env.deps;

    const usable = await findUsableMedia(db, main.tenantId, main.sender.id, handle, env.clock.now());
    expect(usable).toMatchObject({ id: handle, sender_id: main.sender.id, type: "image" });

    const other = await otherTenant();
    const otherSender = await addSender(other.tenantId);
    // Retired at once: the other tests rely on the main tenant having exactly one active sender.
    const secondSender = await addSender(main.tenantId);
    await setSenderActive(db, secondSender.id, false);
    const refusals: [() => Promise<unknown>, string][] = [
      [
        () => findUsableMedia(db, other.tenantId, otherSender.id, handle, env.clock.now()),
        "template.header.media",
      ],
      [
        () => findUsableMedia(db, other.tenantId, main.sender.id, handle, env.clock.now()),
        "template.header.media",
      ],
      [
        () => findUsableMedia(db, main.tenantId, secondSender.id, handle, env.clock.now(), "header.media"),
        "header.media",
      ],
      [
        () => findUsableMedia(db, main.tenantId, main.sender.id, handle.toLowerCase(), env.clock.now()),
        "template.header.media",
      ],
    ];
    for (const [attempt, param] of refusals) {
      await expect(attempt()).rejects.toMatchObject({ code: "resource_missing", status: 404, param });
    }

    env.clock.advance(31 * DAY_SECONDS);
    try {
      await expect(
        findUsableMedia(db, main.tenantId, main.sender.id, handle, env.clock.now()),
      ).rejects.toMatchObject({ code: "media_expired", status: 400, param: "template.header.media" });
    } finally {
      env.clock.advance(-31 * DAY_SECONDS);
    }
  });
});
