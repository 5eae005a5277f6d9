/** The channel this service speaks (the daily quota and the API's `channel` fields name it). */
export const CHANNEL = "whatsapp";
/**
 * The channel provider as the rest of the service sees it (DESIGN §4): send, upload, list templates.
 * Callers speak in these provider-neutral shapes; only an implementation (whatsapp.ts) knows the wire
 * format. Failures are ProviderErrors with a stable code and a retry verdict the send worker acts on.
 */

/** One sender's credentials at the provider (a WhatsApp phone number inside a business account). */
export interface SenderCredentials {
  phoneNumberId: string;
  wabaId: string;
  accessToken: string;
}

export type OutboundHeader =
  | { type: "text"; text: string }
  /** Give `mediaId` (an uploaded file) or `link` (a public URL); `filename` is for documents. */
  | { type: "image" | "video" | "document"; link?: string; mediaId?: string; filename?: string };

/**
 * `to` is E.164 with its leading '+'. `callbackData` comes back in the send's status webhooks
 * (Graph's biz_opaque_callback_data): how a send whose answer was lost is recognized later.
 */
export type OutboundPayload =
  | { kind: "text"; to: string; body: string; callbackData?: string }
  | {
      kind: "template";
      to: string;
      callbackData?: string;
      name: string;
      language: string;
      components: {
        header?: OutboundHeader;
        /** Values of the body placeholders {{1}}, {{2}}, ... in order. */
        body?: string[];
        /** Values of dynamic URL buttons, by the button's position in the template. */
        buttons?: { index: number; text: string }[];
      };
    };

export interface MediaFile {
  /** The file; a Blob (e.g. the uploaded File) is streamed to the provider without another copy. */
  content: Blob | Uint8Array<ArrayBuffer>;
  mimeType: string;
  filename?: string;
}

/** Template components exactly as the provider returns them (WhatsApp's `message_templates` shape). */
export type TemplateComponent =
  | { type: "HEADER"; format: "TEXT"; text: string; example?: { header_text: string[] } }
  | { type: "HEADER"; format: "IMAGE" | "VIDEO" | "DOCUMENT"; example?: { header_handle: string[] } }
  | { type: "BODY"; text: string; example?: { body_text: string[][] } }
  | { type: "FOOTER"; text: string }
  | { type: "BUTTONS"; buttons: TemplateButton[] };

export type TemplateButton =
  | { type: "URL"; text: string; url: string; example?: string[] }
  | { type: "QUICK_REPLY"; text: string }
  | { type: "PHONE_NUMBER"; text: string; phone_number: string };

/** A template as the provider reports it: every status (not only APPROVED), category in its own case. */
export interface ProviderTemplate {
  providerId: string;
  name: string;
  language: string;
  status: string;
  category: string;
  components: TemplateComponent[];
}

export interface ChannelProvider {
  sendMessage(creds: SenderCredentials, message: OutboundPayload): Promise<{ providerMessageId: string }>;
  uploadMedia(creds: SenderCredentials, file: MediaFile): Promise<{ providerMediaId: string }>;
  /** All templates of the sender's business account, every page. */
  listTemplates(creds: SenderCredentials): Promise<ProviderTemplate[]>;
}

export type ProviderErrorCode =
  | "provider_rate_limited"
  | "provider_unavailable"
  | "recipient_invalid"
  | "template_mismatch"
  | "template_not_found"
  | "reengagement_required"
  /** The customer stopped marketing messages (131050): their contact is opted out (src/contacts/opt-out.ts). */
  | "recipient_opted_out"
  | "parameter_invalid"
  | "provider_auth_failed"
  | "provider_error";

export interface NormalizedProviderError {
  code: ProviderErrorCode;
  message: string;
  retryable: boolean;
  /** The provider's own numeric code, when it gave one. */
  providerCode?: number;
}

export class ProviderError extends Error {
  readonly code: ProviderErrorCode;
  readonly retryable: boolean;
  readonly httpStatus?: number;
  readonly providerCode?: number;

  constructor(failure: NormalizedProviderError, httpStatus?: number, options?: { cause?: unknown }) {
    super(failure.message, options);
    this.name = "ProviderError";
    this.code = failure.code;
    this.retryable = failure.retryable;
    this.httpStatus = httpStatus;
    this.providerCode = failure.providerCode;
  }
}

// WhatsApp Cloud API error codes, grouped by what the service should do about them.
const GRAPH_CODE_GROUPS: [codes: number[], code: ProviderErrorCode, retryable: boolean][] = [
  [[4, 80007, 130429, 131048, 131056], "provider_rate_limited", true],
  [[1, 2, 131000], "provider_unavailable", true],
  [[131026, 133010], "recipient_invalid", false],
  [[132000, 132005, 132007, 132012], "template_mismatch", false],
  [[132001], "template_not_found", false],
  [[131047], "reengagement_required", false],
  // 131050: the user stopped marketing messages from this business; the one code that opts out.
  [[131050], "recipient_opted_out", false],
  // 132018: a template parameter holds a line break, a tab or more than four spaces in a row.
  [[100, 131008, 131009, 132018], "parameter_invalid", false],
  [[190], "provider_auth_failed", false],
];
const GRAPH_CODES = new Map(
  GRAPH_CODE_GROUPS.flatMap(([codes, code, retryable]) =>
    codes.map((graphCode) => [graphCode, { code, retryable }] as const),
  ),
);

/**
 * Maps a provider failure to a stable code and a retry verdict. An unknown code is retried only when
 * the HTTP status says the fault is on the provider's side (5xx) or a throttle (429); without a code,
 * the HTTP status alone decides.
 */
export function normalizeProviderError(
  graphCode: number | undefined,
  message: string,
  httpStatus?: number,
): NormalizedProviderError {
  const known = graphCode === undefined ? undefined : GRAPH_CODES.get(graphCode);
  const base =
    graphCode === undefined
      ? { message }
      : { message: `${message} (WhatsApp error ${graphCode})`, providerCode: graphCode };
  if (known) return { ...base, ...known };
  if (httpStatus === 429) return { ...base, code: "provider_rate_limited", retryable: true };
  if (httpStatus !== undefined && httpStatus >= 500) {
    return { ...base, code: "provider_unavailable", retryable: true };
  }
  return { ...base, code: "provider_error", retryable: false };
}
