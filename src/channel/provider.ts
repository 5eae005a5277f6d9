import {
  GRAPH_ERROR_CODES,
  MESSAGE_FAILURES,
  type MessageFailure,
  PROVIDER_FALLBACK_CODES,
  type ProviderErrorCode,
} from "./failure-codes.ts";
import type { RecipientAddress } from "./identity.ts";

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
 * Whom a send is for, as Graph names it: `to`, a phone (E.164 with its leading '+'), or `recipient`,
 * a BSUID or parent BSUID (DESIGN §14: a contact without a phone is reached by its BSUID).
 */
export type OutboundAddress = { to: string; recipient?: undefined } | { recipient: string; to?: undefined };

/** The address of a send to `address`: `to` for a phone, `recipient` for a BSUID. */
export function outboundAddress(address: RecipientAddress): OutboundAddress {
  return "phone" in address ? { to: address.phone } : { recipient: address.userId };
}

/**
 * `callbackData` comes back in the send's status webhooks (Graph's biz_opaque_callback_data): how a
 * send whose answer was lost is recognized later.
 */
export type OutboundPayload = OutboundAddress &
  (
    | { kind: "text"; body: string; callbackData?: string }
    | {
        kind: "template";
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
      }
  );

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
  /** Why a REJECTED template was rejected (Graph's `rejected_reason`); absent or null otherwise. */
  rejectedReason?: string | null;
}

/** The most `downloadMedia` reads: WhatsApp's own cap for received video and audio. */
export const MEDIA_DOWNLOAD_LIMIT_BYTES = 16 * 1024 * 1024;

/** A received message's media, as the provider served it. */
export interface DownloadedMedia {
  /** The provider's MIME type (parameters, e.g. `; codecs=opus`, kept as given). */
  contentType: string;
  bytes: Uint8Array<ArrayBuffer>;
  /** A file name, when the provider named one. */
  filename?: string;
}

export interface ChannelProvider {
  sendMessage(creds: SenderCredentials, message: OutboundPayload): Promise<{ providerMessageId: string }>;
  uploadMedia(creds: SenderCredentials, file: MediaFile): Promise<{ providerMediaId: string }>;
  /** All templates of the sender's business account, every page. */
  listTemplates(creds: SenderCredentials): Promise<ProviderTemplate[]>;
  /**
   * A received message's media by the provider's media id, fetched with the receiving sender's
   * credentials; refused (a ProviderError) above MEDIA_DOWNLOAD_LIMIT_BYTES.
   */
  downloadMedia(creds: SenderCredentials, mediaId: string): Promise<DownloadedMedia>;
}

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

const GRAPH_CODES = new Map(
  GRAPH_ERROR_CODES.flatMap(([graphCodes, code]) =>
    graphCodes.map((graphCode) => [graphCode, code] as const),
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
  const base =
    graphCode === undefined
      ? { message }
      : { message: `${message} (WhatsApp error ${graphCode})`, providerCode: graphCode };
  const code =
    (graphCode === undefined ? undefined : GRAPH_CODES.get(graphCode)) ??
    (httpStatus === 429
      ? PROVIDER_FALLBACK_CODES.throttled
      : httpStatus !== undefined && httpStatus >= 500
        ? PROVIDER_FALLBACK_CODES.unavailable
        : PROVIDER_FALLBACK_CODES.unknown);
  return { ...base, code, retryable: MESSAGE_FAILURES[code].retryable };
}

/**
 * A send's error as a message's failure (`failure`, or `retrying.last_error`): a ProviderError says
 * its own code and verdict; anything else (a fault between us and the provider's answer) is an
 * unclassified `provider_error`, whose text stays in the logs.
 */
export function failureOf(error: unknown): MessageFailure {
  if (error instanceof ProviderError) {
    return { code: error.code, message: error.message, retryable: error.retryable };
  }
  return {
    code: PROVIDER_FALLBACK_CODES.unknown,
    message: "The send failed unexpectedly before the provider answered; the error is logged.",
    retryable: MESSAGE_FAILURES[PROVIDER_FALLBACK_CODES.unknown].retryable,
  };
}
