import {
  type ChannelProvider,
  MEDIA_DOWNLOAD_LIMIT_BYTES,
  type MediaFile,
  normalizeProviderError,
  type OutboundHeader,
  type OutboundPayload,
  ProviderError,
  type ProviderTemplate,
  type SenderCredentials,
  type TemplateComponent,
} from "./provider.ts";

/** WhatsApp Cloud API over HTTP (Graph), against Meta or the simulator (DESIGN §4). */
export interface WhatsAppProviderOptions {
  /** Graph base URL without the version: https://graph.facebook.com, or the simulator's address. */
  baseUrl: string;
  graphVersion?: string;
  /** Per request; a request that takes longer fails as retryable. */
  timeoutMs?: number;
  fetch?: (url: string, init: RequestInit) => Promise<Response>;
  /** The most a media download reads (default MEDIA_DOWNLOAD_LIMIT_BYTES, 16 MB). */
  mediaLimitBytes?: number;
}

type GraphParameter =
  | { type: "text"; text: string }
  | { type: "image" | "video" | "document"; [media: string]: unknown };

type GraphComponent =
  | { type: "header" | "body"; parameters: GraphParameter[] }
  | { type: "button"; sub_type: "url"; index: string; parameters: GraphParameter[] };

interface GraphTemplate {
  id: string;
  name: string;
  language: string;
  status: string;
  category: string;
  components: TemplateComponent[];
  rejected_reason?: string;
}

interface GraphErrorBody {
  error?: { message?: string; code?: number; error_data?: { details?: string } };
}

const TEMPLATE_FIELDS = "id,name,language,status,category,components,rejected_reason";
const TEMPLATE_PAGE_SIZE = "100";

export function createWhatsAppProvider(options: WhatsAppProviderOptions): ChannelProvider {
  const root = `${options.baseUrl.replace(/\/+$/, "")}/${options.graphVersion ?? "v21.0"}`;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const fetchImpl = options.fetch ?? fetch;

  const mediaLimit = options.mediaLimitBytes ?? MEDIA_DOWNLOAD_LIMIT_BYTES;

  /**
   * One authorized request to `url`, its answer read by `read` inside the timeout (which also covers
   * a body that stalls); no answer in time, or none at all, is a retryable provider_unavailable.
   */
  async function request<T>(
    creds: SenderCredentials,
    url: string,
    init: RequestInit,
    read: (response: Response) => Promise<T>,
  ): Promise<{ status: number; result: T }> {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${creds.accessToken}`);
    try {
      const response = await fetchImpl(url, { ...init, headers, signal: AbortSignal.timeout(timeoutMs) });
      return { status: response.status, result: await read(response) };
    } catch (error) {
      if (error instanceof ProviderError) throw error;
      const timedOut =
        error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError");
      const message = timedOut
        ? `WhatsApp did not answer within ${timeoutMs} ms`
        : `WhatsApp could not be reached: ${error instanceof Error ? error.message : String(error)}`;
      throw new ProviderError({ code: "provider_unavailable", message, retryable: true }, undefined, {
        cause: error,
      });
    }
  }

  async function call(creds: SenderCredentials, path: string, init: RequestInit = {}): Promise<unknown> {
    const { status, result: text } = await request(creds, `${root}${path}`, init, (r) => r.text());
    const body = parseJson(text);
    if (status >= 200 && status < 300) return body;
    throw graphError(status, body);
  }

  return {
    async sendMessage(creds, message) {
      const answer = (await call(creds, `/${encodeURIComponent(creds.phoneNumberId)}/messages`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(sendBody(message)),
      })) as { messages?: { id?: unknown }[] } | undefined;
      const id = answer?.messages?.[0]?.id;
      // Not retryable: the message may well have gone out, and a retry would send it twice.
      if (typeof id !== "string") throw unexpectedAnswer("the send answer carries no message id");
      return { providerMessageId: id };
    },

    async uploadMedia(creds, file: MediaFile) {
      const form = new FormData();
      form.append("messaging_product", "whatsapp");
      form.append("type", file.mimeType);
      // Wrapping a Blob references its bytes rather than copying them; the type is ours (sniffed).
      form.append("file", new Blob([file.content], { type: file.mimeType }), file.filename ?? "upload");
      const answer = (await call(creds, `/${encodeURIComponent(creds.phoneNumberId)}/media`, {
        method: "POST",
        body: form,
      })) as { id?: unknown } | undefined;
      if (typeof answer?.id !== "string") throw unexpectedAnswer("the upload answer carries no media id");
      return { providerMediaId: answer.id };
    },

    async listTemplates(creds) {
      const templates: ProviderTemplate[] = [];
      let after: string | undefined;
      for (;;) {
        const query = new URLSearchParams({ fields: TEMPLATE_FIELDS, limit: TEMPLATE_PAGE_SIZE });
        if (after) query.set("after", after);
        const page = (await call(creds, `/${encodeURIComponent(creds.wabaId)}/message_templates?${query}`)) as
          | { data?: GraphTemplate[]; paging?: { cursors?: { after?: string }; next?: string } }
          | undefined;
        if (!Array.isArray(page?.data)) throw unexpectedAnswer("the template list carries no data");
        templates.push(...page.data.map(toProviderTemplate));
        // Graph gives `next` only while more pages follow; we page with the cursor against our own base URL.
        const nextAfter = page.paging?.cursors?.after;
        if (!page.paging?.next || !nextAfter || nextAfter === after) return templates;
        after = nextAfter;
      }
    },

    // Graph: GET /{media-id} names a short-lived URL, which is fetched with the same token.
    async downloadMedia(creds, mediaId) {
      const info = (await call(creds, `/${encodeURIComponent(mediaId)}`)) as GraphMediaInfo | undefined;
      const url = info?.url;
      if (typeof url !== "string" || !URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
        throw unexpectedAnswer("the media answer carries no URL");
      }
      const declared = Number(info?.file_size);
      if (Number.isFinite(declared) && declared > mediaLimit) throw mediaTooLarge(declared, mediaLimit);
      const { status, result } = await request(creds, url, {}, async (response) => {
        if (response.status < 200 || response.status >= 300) {
          return { error: parseJson(await response.text()) } as const;
        }
        const bytes = await readCapped(response, mediaLimit);
        if (!bytes) throw mediaTooLarge(undefined, mediaLimit);
        return {
          bytes,
          contentType: response.headers.get("content-type"),
          disposition: response.headers.get("content-disposition"),
        } as const;
      });
      if ("error" in result) throw graphError(status, result.error);
      const contentType =
        (typeof info?.mime_type === "string" && info.mime_type) ||
        result.contentType ||
        "application/octet-stream";
      const filename = dispositionFilename(result.disposition);
      return { contentType, bytes: result.bytes, ...(filename ? { filename } : {}) };
    },
  };
}

interface GraphMediaInfo {
  url?: unknown;
  mime_type?: unknown;
  sha256?: unknown;
  file_size?: unknown;
  id?: unknown;
}

/** The body, or undefined as soon as it proves longer than `limit` (the rest is not read). */
async function readCapped(response: Response, limit: number): Promise<Uint8Array<ArrayBuffer> | undefined> {
  const length = Number(response.headers.get("content-length") ?? Number.NaN);
  if (Number.isFinite(length) && length > limit) {
    await response.body?.cancel();
    return undefined;
  }
  if (!response.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return bytes;
}

/** `attachment; filename="a.pdf"` -> a.pdf; the caller sanitizes it before showing or sending it. */
function dispositionFilename(header: string | null): string | undefined {
  const match = header ? /filename\*?=(?:UTF-8'')?"?([^";]+)"?/i.exec(header) : null;
  if (!match?.[1]) return undefined;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    return match[1];
  }
}

function mediaTooLarge(size: number | undefined, limit: number): ProviderError {
  const mb = Math.round(limit / (1024 * 1024));
  return new ProviderError({
    code: "provider_error",
    message:
      size === undefined
        ? `The media is larger than ${mb} MB, the most that is fetched.`
        : `The media is ${size} bytes; at most ${mb} MB is fetched.`,
    retryable: false,
  });
}

function sendBody(message: OutboundPayload) {
  // A phone goes in `to` as digits; a BSUID (a user who withholds their phone) in `recipient`.
  const address =
    message.recipient === undefined
      ? { to: message.to.replace(/^\+/, "") }
      : { recipient: message.recipient };
  const envelope = {
    messaging_product: "whatsapp",
    recipient_type: "individual",
    ...address,
    ...(message.callbackData ? { biz_opaque_callback_data: message.callbackData } : {}),
  } as const;
  if (message.kind === "text") return { ...envelope, type: "text", text: { body: message.body } };
  const components = templateComponents(message.components);
  return {
    ...envelope,
    type: "template",
    template: {
      name: message.name,
      language: { code: message.language },
      ...(components.length > 0 ? { components } : {}),
    },
  };
}

function templateComponents(
  values: Extract<OutboundPayload, { kind: "template" }>["components"],
): GraphComponent[] {
  const components: GraphComponent[] = [];
  if (values.header) components.push({ type: "header", parameters: [headerParameter(values.header)] });
  if (values.body && values.body.length > 0) {
    components.push({ type: "body", parameters: values.body.map((text) => ({ type: "text", text })) });
  }
  for (const button of values.buttons ?? []) {
    components.push({
      type: "button",
      sub_type: "url",
      index: String(button.index),
      parameters: [{ type: "text", text: button.text }],
    });
  }
  return components;
}

function headerParameter(header: OutboundHeader): GraphParameter {
  if (header.type === "text") return { type: "text", text: header.text };
  const media: Record<string, string> = header.mediaId ? { id: header.mediaId } : {};
  if (!header.mediaId && header.link) media.link = header.link;
  if (header.type === "document" && header.filename) media.filename = header.filename;
  return { type: header.type, [header.type]: media };
}

function toProviderTemplate(template: GraphTemplate): ProviderTemplate {
  return {
    providerId: template.id,
    name: template.name,
    language: template.language,
    status: template.status,
    category: template.category,
    components: template.components,
    // Graph says NONE for a template that was not rejected.
    ...(template.rejected_reason &&
      template.rejected_reason !== "NONE" && { rejectedReason: template.rejected_reason }),
  };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function graphError(status: number, body: unknown): ProviderError {
  const error = (body as GraphErrorBody | undefined)?.error;
  // Graph prefixes messages with "(#code) "; the normalized message names the code itself.
  const title = error?.message?.replace(/^\(#\d+\)\s*/, "") || `HTTP ${status} from WhatsApp`;
  const details = error?.error_data?.details;
  const message = details && details !== title ? `${title}: ${details}` : title;
  const graphCode = typeof error?.code === "number" ? error.code : undefined;
  return new ProviderError(normalizeProviderError(graphCode, message, status), status);
}

function unexpectedAnswer(what: string): ProviderError {
  return new ProviderError({
    code: "provider_error",
    message: `Unexpected WhatsApp answer: ${what}`,
    retryable: false,
  });
}
