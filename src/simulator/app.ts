import { createHash, randomBytes, randomInt } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { ValueErrorType } from "@sinclair/typebox/errors";
import { Elysia, type Static, t } from "elysia";
import { SIGNATURE_HEADER, signPayload } from "../channel/signature.ts";
import {
  buildWebhook,
  type DeliveryStatus,
  type InboundMessage,
  type StatusError,
  type WebhookAccount,
  type WebhookBody,
  webhookTimestamp,
} from "../channel/webhook-payloads.ts";
import { type GraphMessageTemplate, placeholderCount, TEMPLATE_CATALOGUE } from "./catalogue.ts";
import { SAMPLE_MEDIA } from "./sample-media.ts";
import {
  FAST_STATUS_DELAY_MS,
  SANDBOX_REPLY_TEXT,
  type SandboxBehaviour,
  sandboxBehaviour,
} from "./sandbox.ts";

/**
 * The WhatsApp Cloud API sandbox (DESIGN §4): Graph routes that validate sends like the real API and
 * answer with its shapes, signed status webhooks after each accepted send, and a control API under
 * /_sim for driving inbound messages, statuses and failures. State lives in memory.
 */
export interface SimulatorOptions {
  /** Where webhooks go: the service's /webhooks/whatsapp (a function when it is known only later). */
  webhookUrl: string | (() => string);
  /** Key of the X-Hub-Signature-256 HMAC. */
  appSecret: string;
  /** Wait before each of the sent, delivered and read webhooks of a send. */
  statusDelayMs: number;
  /** Post each send's statuses in random order, as a real provider sometimes does. */
  shuffleStatuses?: boolean;
  /**
   * How long a status webhook the receiver did not take (no 2xx) is retried, with exponential
   * backoff capped at a minute, before it is dropped. Default 3600 (Meta retries for 7 days).
   */
  webhookRetrySeconds?: number;
  /**
   * Sends per second accepted per phone number (a bucket of one second's worth); beyond it a send
   * is answered with 130429, as Graph does past a number's throughput. Unset or 0: unlimited.
   * POST /_sim/mps changes it at run time.
   */
  mps?: number;
  /**
   * The last this many sends are remembered (GET /_sim/sent, and where POST /_sim/status posts by
   * wamid); older ones are forgotten, so that a sandbox left running stays flat. Default 100,000.
   */
  keepSends?: number;
  log?: (line: string) => void;
}

export interface SentRecord {
  /** The wamid answered for the send. */
  id: string;
  phone_number_id: string;
  /** The send body exactly as received. */
  payload: unknown;
  received_at: string;
}

// Webhooks name a business account and a display number; the simulator accepts any phone-number-id
// without knowing either, so these stand in unless a control call gives its own.
export const SIMULATOR_WABA_ID = "100000000000000";
export const SIMULATOR_DISPLAY_PHONE_NUMBER = "15550100000";

const TEXT_BODY_LIMIT = 4096;
const DEFAULT_KEEP_SENDS = 100_000;
const WEBHOOK_TIMEOUT_MS = 10_000;
/** The first wait before a status webhook is posted again; each wait doubles, up to the cap. */
const WEBHOOK_RETRY_FIRST_MS = 200;
const WEBHOOK_RETRY_CAP_MS = 60_000;
export const DEFAULT_WEBHOOK_RETRY_SECONDS = 3600;

/** The wait after the `attempt`th failed post (0-based): 0.2 s, 0.4 s, 0.8 s, ... 60 s, 60 s, ... */
export function webhookRetryDelayMs(attempt: number): number {
  return Math.min(WEBHOOK_RETRY_FIRST_MS * 2 ** Math.min(attempt, 20), WEBHOOK_RETRY_CAP_MS);
}
const DEFAULT_TEMPLATE_PAGE_SIZE = 25;

// Graph errors the simulator answers with: HTTP status, the message's title, the usual details.
const GRAPH_ERRORS: Record<number, { status: number; title: string; details: string }> = {
  1: { status: 500, title: "An unknown error occurred", details: "An unknown error occurred." },
  2: {
    status: 503,
    title: "Service temporarily unavailable",
    details: "The service is temporarily unavailable.",
  },
  4: {
    status: 429,
    title: "Application request limit reached",
    details: "The app has reached its API call rate limit.",
  },
  100: { status: 400, title: "Invalid parameter", details: "A parameter is missing or invalid." },
  190: { status: 401, title: "Invalid OAuth access token", details: "Cannot parse access token." },
  80007: {
    status: 429,
    title: "Rate limit issues",
    details: "The WhatsApp Business Account has reached its rate limit.",
  },
  130429: { status: 429, title: "Rate limit hit", details: "Cloud API message throughput has been reached." },
  131000: {
    status: 500,
    title: "Something went wrong",
    details: "Message failed to send because of an unknown error.",
  },
  131008: {
    status: 400,
    title: "Required parameter is missing",
    details: "A required parameter is missing.",
  },
  131009: { status: 400, title: "Parameter value is not valid", details: "A parameter value is not valid." },
  131026: {
    status: 400,
    title: "Message undeliverable",
    details: "Unable to deliver the message: the recipient may not be on WhatsApp.",
  },
  131047: {
    status: 400,
    title: "Re-engagement message",
    details: "More than 24 hours have passed since the recipient last replied to this number.",
  },
  131048: {
    status: 400,
    title: "Spam rate limit hit",
    details: "There are restrictions on how many messages can be sent from this phone number.",
  },
  131050: {
    status: 400,
    title: "Unable to deliver the message",
    details: "The user has stopped marketing messages from this business.",
  },
  131053: { status: 400, title: "Media upload error", details: "The uploaded media could not be processed." },
  131056: {
    status: 400,
    title: "(Business Account, Consumer Account) pair rate limit hit",
    details: "Too many messages from this sender to the same recipient in a short time.",
  },
  132000: {
    status: 400,
    title: "Number of parameters does not match the expected number of params",
    details: "The parameter count does not match the template.",
  },
  132001: {
    status: 400,
    title: "Template name does not exist in the translation",
    details: "The template does not exist in that language or is not approved.",
  },
  132005: {
    status: 400,
    title: "Translated text too long",
    details: "The filled-in template text is too long.",
  },
  132007: {
    status: 400,
    title: "Template format character policy violated",
    details: "The template content violates a WhatsApp policy.",
  },
  132012: {
    status: 400,
    title: "Parameter format does not match format in the created template",
    details: "A parameter's type does not match the template.",
  },
  132018: {
    status: 400,
    title: "There was an issue with the parameters in your template.",
    details: "Parameters cannot contain new-line or tab characters, or more than 4 consecutive spaces.",
  },
  133010: {
    status: 400,
    title: "Phone number not registered",
    details: "The phone number is not registered.",
  },
};

/** A failure answered in Graph's error shape. */
class GraphError extends Error {
  constructor(
    readonly graphCode: number,
    readonly details?: string,
  ) {
    super(details ?? `Graph error ${graphCode}`);
  }
}

function graphErrorResponse(graphCode: number, details?: string): Response {
  const known = GRAPH_ERRORS[graphCode];
  const body = {
    error: {
      message: `(#${graphCode}) ${known?.title ?? "Simulated error"}`,
      type: "OAuthException",
      code: graphCode,
      error_data: { messaging_product: "whatsapp", details: details ?? known?.details ?? "Simulated error." },
      fbtrace_id: randomBytes(9).toString("base64url"),
    },
  };
  return Response.json(body, { status: known?.status ?? 400 });
}

/** A control API mistake: plain `{error: {message}}`. */
class ControlError extends Error {
  constructor(
    message: string,
    readonly status = 400,
  ) {
    super(message);
  }
}

function controlErrorResponse(message: string, status = 400): Response {
  return Response.json({ error: { message } }, { status });
}

interface ValidationErrorLike {
  all: { type: number; path: string; message: string }[];
}

/** `/template/components/0/type` -> `template['components'][0]['type']`, as Graph names parameters. */
function graphParameterPath(path: string): string {
  const [first, ...rest] = path.split("/").filter(Boolean);
  if (!first) return "request body";
  return first + rest.map((part) => (/^\d+$/.test(part) ? `[${part}]` : `['${part}']`)).join("");
}

function describeValidation(error: ValidationErrorLike, path: (raw: string) => string): string {
  const first = error.all[0];
  if (!first) return "The request is invalid.";
  if (first.type === ValueErrorType.ObjectRequiredProperty) {
    return `The parameter ${path(first.path)} is required.`;
  }
  return `Param ${path(first.path)} is invalid: ${first.message}.`;
}

/** Graph send bodies are kept verbatim, so their schemas accept fields they do not name. */
function openObject<T extends Parameters<typeof t.Object>[0]>(properties: T) {
  return t.Object(properties, { additionalProperties: true });
}

const MediaObject = openObject({
  id: t.Optional(t.String()),
  link: t.Optional(t.String()),
  filename: t.Optional(t.String()),
});

const TemplateParameter = openObject({
  type: t.String(),
  text: t.Optional(t.String()),
  image: t.Optional(MediaObject),
  video: t.Optional(MediaObject),
  document: t.Optional(MediaObject),
});
type TemplateParameter = Static<typeof TemplateParameter>;

const TemplateComponentParameters = openObject({
  type: t.UnionEnum(["header", "body", "button"]),
  sub_type: t.Optional(t.String()),
  index: t.Optional(t.Union([t.String(), t.Integer()])),
  parameters: t.Optional(t.Array(TemplateParameter)),
});
type TemplateComponentParameters = Static<typeof TemplateComponentParameters>;

const SendTemplate = openObject({
  name: t.String(),
  language: openObject({ code: t.String(), policy: t.Optional(t.String()) }),
  components: t.Optional(t.Array(TemplateComponentParameters)),
});
type SendTemplate = Static<typeof SendTemplate>;

const SendBody = openObject({
  messaging_product: t.Literal("whatsapp"),
  recipient_type: t.Optional(t.Literal("individual")),
  to: t.String(),
  // Graph's default type is text.
  type: t.Optional(t.String()),
  text: t.Optional(openObject({ body: t.String(), preview_url: t.Optional(t.Boolean()) })),
  template: t.Optional(SendTemplate),
  // Echoed in this send's status webhooks, as Graph does.
  biz_opaque_callback_data: t.Optional(t.String({ maxLength: 512 })),
});

const GraphVersionParams = {
  version: t.String({ pattern: "^v[0-9]+\\.[0-9]+$" }),
};

const UploadBody = openObject({
  messaging_product: t.Literal("whatsapp"),
  type: t.String(),
  file: t.File(),
});

// What Graph accepts for upload, with its size limit per type.
const MB = 1024 * 1024;
const UPLOAD_LIMITS: Record<string, number> = {
  "image/jpeg": 5 * MB,
  "image/png": 5 * MB,
  "video/mp4": 16 * MB,
  "video/3gpp": 16 * MB,
  "audio/aac": 16 * MB,
  "audio/amr": 16 * MB,
  "audio/mpeg": 16 * MB,
  "audio/mp4": 16 * MB,
  "audio/ogg": 16 * MB,
  "application/pdf": 100 * MB,
  "text/plain": 100 * MB,
};

/** Inbound media the simulator keeps to serve (the newest; older ones answer like expired media). */
const MEDIA_KEPT = 1000;
const MEDIA_KEPT_BYTES = 64 * MB;
/** A given file: up to 20 MB, so a download over the gateway's 16 MB cap can be tried. */
const MEDIA_BASE64_MAX_CHARS = Math.ceil((20 * MB) / 3) * 4;

const InboundRequest = t.Object({
  phone_number_id: t.String({ minLength: 1 }),
  from: t.String({ pattern: "^\\+?[0-9]{7,15}$", description: "the customer's number" }),
  type: t.UnionEnum(["text", "image", "video", "document", "audio", "system"]),
  text: t.Optional(t.String()),
  caption: t.Optional(t.String()),
  filename: t.Optional(t.String({ minLength: 1 })),
  media_base64: t.Optional(
    t.String({ maxLength: MEDIA_BASE64_MAX_CHARS, description: "the file's bytes; default a sample file" }),
  ),
  mime_type: t.Optional(t.String({ pattern: "^[a-z]+/[a-zA-Z0-9.+-]+(; ?[a-z]+=[a-zA-Z0-9.+-]+)?$" })),
  timestamp: t.Optional(t.Integer({ minimum: 0 })),
  name: t.Optional(t.String()),
  id: t.Optional(t.String({ minLength: 1 })),
  new_wa_id: t.Optional(t.String({ pattern: "^[0-9]{7,15}$" })),
  waba_id: t.Optional(t.String({ minLength: 1 })),
  display_phone_number: t.Optional(t.String({ minLength: 1 })),
});
type InboundRequest = Static<typeof InboundRequest>;

const StatusRequest = t.Object({
  wamid: t.String({ minLength: 1 }),
  status: t.UnionEnum(["sent", "delivered", "read", "failed"]),
  phone_number_id: t.Optional(t.String({ minLength: 1 })),
  recipient_id: t.Optional(t.String({ minLength: 1 })),
  timestamp: t.Optional(t.Integer({ minimum: 0 })),
  errors: t.Optional(
    t.Array(
      t.Object({
        code: t.Integer(),
        title: t.Optional(t.String()),
        message: t.Optional(t.String()),
        details: t.Optional(t.String()),
      }),
      { minItems: 1 },
    ),
  ),
  waba_id: t.Optional(t.String({ minLength: 1 })),
  display_phone_number: t.Optional(t.String({ minLength: 1 })),
});

const FailNextRequest = t.Object({
  count: t.Integer({ minimum: 1, maximum: 10_000 }),
  code: t.Integer({ minimum: 1 }),
});

const MpsRequest = t.Object({
  mps: t.Integer({ minimum: 0, maximum: 1_000_000, description: "0: unlimited" }),
});

const SlowNextRequest = t.Object({
  count: t.Integer({ minimum: 1, maximum: 10_000 }),
  delay_ms: t.Integer({ minimum: 1, maximum: 120_000 }),
});

// Which control fields each inbound type takes, and the media it carries.
const INBOUND_FIELDS: Record<InboundRequest["type"], { allowed: string[] }> = {
  text: { allowed: ["text"] },
  system: { allowed: ["text", "new_wa_id"] },
  image: { allowed: ["caption", "media_base64", "mime_type"] },
  video: { allowed: ["caption", "media_base64", "mime_type"] },
  audio: { allowed: ["media_base64", "mime_type"] },
  document: { allowed: ["caption", "filename", "media_base64", "mime_type"] },
};
const TYPE_SPECIFIC_FIELDS = [
  "text",
  "caption",
  "filename",
  "new_wa_id",
  "media_base64",
  "mime_type",
] as const;

/** A received file the simulator serves (GET /{version}/{media-id}, then its URL). */
interface StoredMedia {
  bytes: Uint8Array<ArrayBuffer>;
  mimeType: string;
  sha256: string;
}

function newWamid(): string {
  return `wamid.${randomBytes(30).toString("base64url")}`;
}

/** Graph ids are decimal strings. */
function newNumericId(): string {
  return String(randomInt(1, 10)) + Array.from({ length: 15 }, () => randomInt(0, 10)).join("");
}

function shuffled<T>(items: T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = randomInt(0, i + 1);
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

const SAMPLE_BYTES = new Set<Uint8Array>(Object.values(SAMPLE_MEDIA).map((media) => media.bytes));

function isSample(media: StoredMedia): boolean {
  return SAMPLE_BYTES.has(media.bytes);
}

/** Where a media id's bytes are served, like Graph's lookaside URL (it, too, needs the token). */
const MEDIA_DOWNLOAD_PATH = "/whatsapp_business/attachments";

/** Graph requests carry `Authorization: Bearer <token>`; any non-empty token is accepted. */
function requireBearer(authorization: string | undefined) {
  if (!/^Bearer\s+\S+/i.test(authorization ?? "")) {
    throw new GraphError(190, "Cannot parse access token: send Authorization: Bearer <token>.");
  }
}

/** A path nothing serves: the control API's 404, or Graph's "Unknown path components". */
function unknownPathResponse(request: Request): Response {
  const { pathname } = new URL(request.url);
  return pathname.startsWith("/_sim/")
    ? controlErrorResponse(`Unknown control route: ${request.method} ${pathname}`, 404)
    : Response.json(
        {
          error: {
            message: `Unknown path components: ${request.method} ${pathname}`,
            type: "OAuthException",
            code: 2500,
            fbtrace_id: randomBytes(9).toString("base64url"),
          },
        },
        { status: 404 },
      );
}

function isHttpUrl(value: string): boolean {
  return URL.canParse(value) && /^https?:$/.test(new URL(value).protocol);
}

function describeFailure(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Template cursors: the position of an item in the catalogue, opaque to callers as Graph's are. */
function encodeCursor(position: number): string {
  return Buffer.from(String(position)).toString("base64url");
}

function decodeCursor(cursor: string): number {
  const position = Buffer.from(cursor, "base64url").toString();
  if (!/^\d+$/.test(position)) throw new GraphError(100, "Param after is not a valid cursor.");
  return Number(position);
}

export function createSimulator(options: SimulatorOptions) {
  const log = options.log ?? (() => {});
  const sent: SentRecord[] = [];
  const keepSends = options.keepSends ?? DEFAULT_KEEP_SENDS;
  /** Sends forgotten to keep memory flat (GET /_sim/sent says how many). */
  let forgottenSends = 0;
  /** Where each accepted send went, by wamid, for the status webhooks /_sim/status posts. */
  const accepted = new Map<string, { phoneNumberId: string; waId: string }>();

  /**
   * Past `keepSends`, the oldest tenth is forgotten at once (records and wamids alike; amortized, not
   * one shift per send). A status posted later for a forgotten wamid needs its phone number and
   * recipient given, as for any unknown one.
   */
  function forgetOldSends(): void {
    const slack = Math.max(1, Math.floor(keepSends / 10));
    if (sent.length > keepSends + slack) {
      const drop = sent.length - keepSends;
      sent.splice(0, drop);
      forgottenSends += drop;
    }
    if (accepted.size > keepSends + slack) {
      let drop = accepted.size - keepSends;
      for (const wamid of accepted.keys()) {
        if (drop-- <= 0) break;
        accepted.delete(wamid);
      }
    }
  }
  /** Uploaded media id -> the phone number id it was uploaded for. */
  const uploads = new Map<string, string>();
  /** Inbound media by id, oldest first: at most MEDIA_KEPT files and MEDIA_KEPT_BYTES of given ones. */
  const inboundMedia = new Map<string, StoredMedia>();
  let inboundMediaBytes = 0;

  function keepMedia(media: StoredMedia): string {
    const id = newNumericId();
    inboundMedia.set(id, media);
    // The sample files are shared, so only given files count against the byte budget.
    if (!isSample(media)) inboundMediaBytes += media.bytes.byteLength;
    for (const [oldId, old] of inboundMedia) {
      if (inboundMedia.size <= MEDIA_KEPT && inboundMediaBytes <= MEDIA_KEPT_BYTES) break;
      if (oldId === id) break;
      inboundMedia.delete(oldId);
      if (!isSample(old)) inboundMediaBytes -= old.bytes.byteLength;
    }
    return id;
  }
  const pendingFailures: number[] = [];
  /** Delays (ms) before answering the next sends (POST /_sim/slow-next). */
  const pendingDelays: number[] = [];
  // Aborting cancels every scheduled status webhook (reset, stop).
  let statusRuns = new AbortController();
  let mps = options.mps ?? 0;
  /** Per phone number id: tokens left and when they were counted (the SIMULATOR_MPS bucket). */
  const buckets = new Map<string, { tokens: number; at: number }>();

  /** False when this number has used up its throughput: the send is answered with 130429. */
  function takeThroughput(phoneNumberId: string): boolean {
    if (mps <= 0) return true;
    const now = performance.now();
    const bucket = buckets.get(phoneNumberId) ?? { tokens: mps, at: now };
    bucket.tokens = Math.min(mps, bucket.tokens + ((now - bucket.at) * mps) / 1000);
    bucket.at = now;
    buckets.set(phoneNumberId, bucket);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }

  /** The HTTP status the gateway answered, and the phone number ids it said it does not know. */
  async function postWebhook(
    body: WebhookBody,
    signal?: AbortSignal,
  ): Promise<{ status: number; unknownNumbers: string[] }> {
    const raw = JSON.stringify(body);
    const timeout = AbortSignal.timeout(WEBHOOK_TIMEOUT_MS);
    const target = typeof options.webhookUrl === "function" ? options.webhookUrl() : options.webhookUrl;
    const response = await fetch(target, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "facebookexternalua",
        [SIGNATURE_HEADER]: signPayload(raw, options.appSecret),
      },
      body: raw,
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    // The gateway takes a webhook for a number it does not know with a 200 (as it must, or the
    // provider would retry it for days) and names the number in its answer.
    const answer: unknown = await response.json().catch(() => null);
    const unknown = (answer as { unknown_phone_number_ids?: unknown } | null)?.unknown_phone_number_ids;
    return {
      status: response.status,
      unknownNumbers: Array.isArray(unknown) ? unknown.filter((n) => typeof n === "string") : [],
    };
  }

  /**
   * A provider keeps retrying a webhook the receiver did not take (a 5xx, a refused connection
   * while the api restarts), backing off, and gives up only after `webhookRetrySeconds`.
   */
  async function postWebhookWithRetries(body: WebhookBody, what: string, signal: AbortSignal): Promise<void> {
    const giveUpAt = Date.now() + (options.webhookRetrySeconds ?? DEFAULT_WEBHOOK_RETRY_SECONDS) * 1000;
    for (let attempt = 0; ; attempt++) {
      let outcome: string;
      try {
        const { status, unknownNumbers } = await postWebhook(body, signal);
        if (status >= 200 && status < 300) {
          if (unknownNumbers.length > 0) log(`webhook ${what}: the service does not know ${unknownNumbers}`);
          return;
        }
        outcome = `HTTP ${status}`;
      } catch (error) {
        if (signal.aborted) return;
        outcome = describeFailure(error);
      }
      const delay = webhookRetryDelayMs(attempt);
      if (Date.now() + delay > giveUpAt) {
        log(`webhook ${what} dropped after ${attempt + 1} attempts (${outcome})`);
        return;
      }
      log(`webhook ${what} failed (${outcome}); retrying in ${delay} ms`);
      await sleep(delay, undefined, { signal });
    }
  }

  /**
   * For control calls: one attempt, and the caller learns what the service answered. A number the
   * service does not know is the caller's mistake (a typo, the wrong seed): a 404 that says so.
   */
  async function postWebhookOnce(body: WebhookBody, phoneNumberId: string) {
    let answer: Awaited<ReturnType<typeof postWebhook>>;
    try {
      answer = await postWebhook(body);
    } catch (error) {
      return { webhook_status: null, webhook_error: describeFailure(error) };
    }
    if (answer.unknownNumbers.includes(phoneNumberId)) {
      throw new ControlError(
        `phone_number_id ${phoneNumberId} is not a sender of the service: it answered ${answer.status} and dropped the webhook. Use a connected sender's number (bun run cli sender list; the seed's is 100000000000001).`,
        404,
      );
    }
    return { webhook_status: answer.status };
  }

  function statusUpdate(
    wamid: string,
    status: DeliveryStatus,
    recipientId: string,
    timestamp: string,
    errors?: StatusError[],
    callbackData?: string,
  ) {
    return {
      id: wamid,
      status,
      timestamp,
      recipient_id: recipientId,
      ...(errors ? { errors } : {}),
      ...(callbackData ? { biz_opaque_callback_data: callbackData } : {}),
    };
  }

  function scheduleStatuses(
    phoneNumberId: string,
    wamid: string,
    recipientId: string,
    callbackData?: string,
    sandbox?: SandboxBehaviour,
  ) {
    const account = {
      wabaId: SIMULATOR_WABA_ID,
      phoneNumberId,
      displayPhoneNumber: SIMULATOR_DISPLAY_PHONE_NUMBER,
    };
    const delayMs = sandbox?.kind === "reads_fast" ? FAST_STATUS_DELAY_MS : options.statusDelayMs;
    const steps =
      sandbox?.kind === "stays_sent" ? (["sent"] as const) : (["sent", "delivered", "read"] as const);
    // Timestamps follow the true order even when the webhooks arrive shuffled.
    const start = Date.now();
    const updates = steps.map((status, step) =>
      statusUpdate(
        wamid,
        status,
        recipientId,
        webhookTimestamp(new Date(start + (step + 1) * delayMs)),
        undefined,
        callbackData,
      ),
    );
    const signal = statusRuns.signal;
    void (async () => {
      for (const update of options.shuffleStatuses ? shuffled(updates) : updates) {
        await sleep(delayMs, undefined, { signal });
        await postWebhookWithRetries(
          buildWebhook(account, { statuses: [update] }),
          `${update.status} ${wamid}`,
          signal,
        );
      }
      if (sandbox?.kind === "replies") {
        await sleep(delayMs, undefined, { signal });
        const { webhook, message } = inboundWebhook({
          phone_number_id: phoneNumberId,
          from: recipientId,
          type: "text",
          text: SANDBOX_REPLY_TEXT,
          name: "Sandbox Customer",
        });
        await postWebhookWithRetries(webhook, `sandbox reply ${message.id} from ${recipientId}`, signal);
      }
    })().catch((error) => {
      if (!signal.aborted) log(`status webhooks for ${wamid} stopped: ${describeFailure(error)}`);
    });
  }

  function checkTextParameters(where: string, parameters: TemplateParameter[]) {
    for (const parameter of parameters) {
      if (parameter.type !== "text") {
        throw new GraphError(132012, `${where}: expected a text parameter, got ${parameter.type}.`);
      }
      if (!parameter.text) throw new GraphError(131008, `${where}: a text parameter needs a non-empty text.`);
      if (/[\n\t]| {5,}/.test(parameter.text)) {
        throw new GraphError(132018, `${where}: ${GRAPH_ERRORS[132018]?.details}`);
      }
    }
  }

  function checkCount(where: string, expected: number, parameters: TemplateParameter[]) {
    if (parameters.length !== expected) {
      throw new GraphError(132000, `${where}: expected ${expected} parameters, got ${parameters.length}.`);
    }
  }

  function checkHeader(
    template: GraphMessageTemplate,
    given: TemplateComponentParameters | undefined,
    phoneNumberId: string,
  ) {
    const header = template.components.find((component) => component.type === "HEADER");
    const parameters = given?.parameters ?? [];
    if (!header) {
      checkCount("header", 0, parameters);
      return;
    }
    if (header.format === "TEXT") {
      checkCount("header", placeholderCount(header.text), parameters);
      checkTextParameters("header", parameters);
      return;
    }
    checkCount("header", 1, parameters);
    const kind = header.format.toLowerCase() as "image" | "video" | "document";
    const parameter = parameters[0]!;
    if (parameter.type !== kind) {
      throw new GraphError(132012, `header: expected a ${kind} parameter, got ${parameter.type}.`);
    }
    const media = parameter[kind];
    if (!media?.id && !media?.link) {
      throw new GraphError(131008, `header: the ${kind} needs an id or a link.`);
    }
    if (media.id && media.link) {
      throw new GraphError(100, `header: give the ${kind} an id or a link, not both.`);
    }
    if (media.link && !isHttpUrl(media.link)) {
      throw new GraphError(131009, `header: the ${kind} link must be an http(s) URL.`);
    }
    if (media.id && uploads.get(media.id) !== phoneNumberId) {
      throw new GraphError(
        131009,
        `header: media id ${media.id} was not uploaded for phone number ${phoneNumberId}.`,
      );
    }
  }

  function checkButtons(template: GraphMessageTemplate, given: Map<number, TemplateComponentParameters>) {
    const buttons = template.components.find((component) => component.type === "BUTTONS")?.buttons ?? [];
    const dynamicUrlPlaceholders = (index: number) => {
      const button = buttons[index];
      return button?.type === "URL" ? placeholderCount(button.url) : 0;
    };
    for (const [index, component] of given) {
      if (component.sub_type?.toLowerCase() !== "url" || dynamicUrlPlaceholders(index) === 0) {
        throw new GraphError(
          132000,
          `button ${index}: the template has no dynamic URL button at this index.`,
        );
      }
    }
    buttons.forEach((_, index) => {
      const expected = dynamicUrlPlaceholders(index);
      if (expected === 0) return;
      const parameters = given.get(index)?.parameters ?? [];
      checkCount(`button ${index}`, expected, parameters);
      checkTextParameters(`button ${index}`, parameters);
    });
  }

  /** Validates a template send like Graph: name and language, then every component's parameters. */
  function checkTemplate(template: SendTemplate, phoneNumberId: string): GraphMessageTemplate {
    const entry = TEMPLATE_CATALOGUE.find(
      (candidate) => candidate.name === template.name && candidate.language === template.language.code,
    );
    if (entry?.status !== "APPROVED") {
      throw new GraphError(
        132001,
        `template name (${template.name}) does not exist in ${template.language.code} or is not approved.`,
      );
    }
    const components = template.components ?? [];
    const single = (type: "header" | "body") => {
      const matching = components.filter((component) => component.type === type);
      if (matching.length > 1) throw new GraphError(100, `${type}: given more than once.`);
      return matching[0];
    };
    const buttons = new Map<number, TemplateComponentParameters>();
    for (const component of components.filter((candidate) => candidate.type === "button")) {
      const index = Number(component.index);
      if (component.index === undefined || !Number.isInteger(index) || index < 0) {
        throw new GraphError(131008, "button: a button component needs a numeric index.");
      }
      if (buttons.has(index)) throw new GraphError(100, `button ${index}: given more than once.`);
      buttons.set(index, component);
    }
    const body = single("body");
    checkHeader(entry, single("header"), phoneNumberId);
    const bodyText = entry.components.find((component) => component.type === "BODY")?.text ?? "";
    checkCount("body", placeholderCount(bodyText), body?.parameters ?? []);
    checkTextParameters("body", body?.parameters ?? []);
    checkButtons(entry, buttons);
    return entry;
  }

  function checkSend(
    body: Static<typeof SendBody>,
    phoneNumberId: string,
  ): { waId: string; summary: string } {
    const waId = body.to.replace(/[\s()+-]/g, "");
    if (!/^\d{7,15}$/.test(waId)) throw new GraphError(100, `Param to (${body.to}) is not a phone number.`);
    const type = body.type ?? "text";
    if (type === "text") {
      if (!body.text?.body) throw new GraphError(100, "The parameter text['body'] is required.");
      if (body.text.body.length > TEXT_BODY_LIMIT) {
        throw new GraphError(100, `Param text['body'] must be at most ${TEXT_BODY_LIMIT} characters long.`);
      }
      return { waId, summary: "text" };
    }
    if (type === "template") {
      if (!body.template) throw new GraphError(100, "The parameter template is required.");
      const entry = checkTemplate(body.template, phoneNumberId);
      return { waId, summary: `template ${entry.name}/${entry.language}` };
    }
    throw new GraphError(100, `Param type (${type}): the simulator accepts text and template messages.`);
  }

  const graphRoutes = new Elysia()
    .onError(({ code, error }) => {
      if (error instanceof GraphError) return graphErrorResponse(error.graphCode, error.details);
      if (code === "VALIDATION") {
        return graphErrorResponse(100, describeValidation(error, graphParameterPath));
      }
      if (code === "PARSE") return graphErrorResponse(100, "The request body could not be parsed.");
      log(`unexpected error: ${describeFailure(error)}`);
      return graphErrorResponse(1);
    })
    // A transform hook runs before validation: like Graph, a request without a token fails on that first.
    .onTransform(({ headers }) => {
      if (!/^Bearer\s+\S+/i.test(headers.authorization ?? "")) {
        throw new GraphError(190, "Cannot parse access token: send Authorization: Bearer <token>.");
      }
    })
    .post(
      "/:version/:phoneNumberId/messages",
      async ({ params, body }) => {
        const { waId, summary } = checkSend(body, params.phoneNumberId);
        // A slow answer: the send is accepted even if the caller gives up (or dies) meanwhile.
        const delay = pendingDelays.shift();
        if (delay !== undefined) await sleep(delay);
        if (!takeThroughput(params.phoneNumberId)) {
          log(`send to ${waId} from ${params.phoneNumberId} refused: over ${mps} messages per second`);
          throw new GraphError(130429);
        }
        const failure = pendingFailures.shift();
        if (failure !== undefined) {
          log(`send to ${waId} failed with injected error ${failure}`);
          throw new GraphError(failure, "Simulated failure requested with POST /_sim/fail-next.");
        }
        const sandbox = sandboxBehaviour(waId);
        if (sandbox?.kind === "fail") {
          log(`send to sandbox recipient ${waId} failed with ${sandbox.graphCode}`);
          throw new GraphError(sandbox.graphCode, `Sandbox recipient +${waId} fails every send this way.`);
        }
        const wamid = newWamid();
        sent.push({
          id: wamid,
          phone_number_id: params.phoneNumberId,
          payload: body,
          received_at: new Date().toISOString(),
        });
        accepted.set(wamid, { phoneNumberId: params.phoneNumberId, waId });
        forgetOldSends();
        log(`accepted ${summary} to ${waId} from ${params.phoneNumberId} as ${wamid}`);
        scheduleStatuses(params.phoneNumberId, wamid, waId, body.biz_opaque_callback_data, sandbox);
        return {
          messaging_product: "whatsapp",
          contacts: [{ input: body.to, wa_id: waId }],
          // Graph marks template sends as accepted in the answer.
          messages: [body.type === "template" ? { id: wamid, message_status: "accepted" } : { id: wamid }],
        };
      },
      { params: t.Object({ ...GraphVersionParams, phoneNumberId: t.String() }), body: SendBody },
    )
    .post(
      "/:version/:phoneNumberId/media",
      ({ params, body }) => {
        const limit = UPLOAD_LIMITS[body.type];
        if (limit === undefined) {
          throw new GraphError(100, `Param type must be one of ${Object.keys(UPLOAD_LIMITS).join(", ")}.`);
        }
        if (body.file.size > limit) {
          throw new GraphError(
            131053,
            `The file is ${body.file.size} bytes; ${body.type} allows ${limit} bytes.`,
          );
        }
        const id = newNumericId();
        uploads.set(id, params.phoneNumberId);
        log(`stored upload ${id} (${body.type}, ${body.file.size} bytes) for ${params.phoneNumberId}`);
        return { id };
      },
      { params: t.Object({ ...GraphVersionParams, phoneNumberId: t.String() }), body: UploadBody },
    )
    .get(
      // Graph's paths are /{version}/{node-id}/{edge}: every GET names its node :nodeId (here the
      // business account), as the router wants one name per position (GET /{version}/{media-id}).
      "/:version/:nodeId/message_templates",
      ({ query, request }) => {
        const limit = query.limit === undefined ? DEFAULT_TEMPLATE_PAGE_SIZE : Number(query.limit);
        if (!Number.isInteger(limit) || limit < 1) {
          throw new GraphError(100, "Param limit must be a positive integer.");
        }
        const start = query.after === undefined ? 0 : decodeCursor(query.after) + 1;
        const data = TEMPLATE_CATALOGUE.slice(start, start + limit);
        if (data.length === 0) return { data };
        const end = start + data.length - 1;
        const paging: { cursors: { before: string; after: string }; next?: string } = {
          cursors: { before: encodeCursor(start), after: encodeCursor(end) },
        };
        if (end < TEMPLATE_CATALOGUE.length - 1) {
          const next = new URL(request.url);
          next.searchParams.set("after", paging.cursors.after);
          paging.next = next.toString();
        }
        return { data, paging };
      },
      {
        params: t.Object({ ...GraphVersionParams, nodeId: t.String() }),
        // `fields` and anything else Graph takes are accepted and ignored: every field is returned.
        query: openObject({ limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
      },
    );

  /** A stored inbound media by id, or the error Graph gives for an id it does not know (or no longer). */
  function storedMedia(mediaId: string): StoredMedia {
    const media = inboundMedia.get(mediaId);
    if (!media) {
      throw new GraphError(
        100,
        `Unsupported get request. Object with ID '${mediaId}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
      );
    }
    return media;
  }

  // Retrieving received media (Graph: GET /{version}/{media-id}, then GET its url with the token).
  // Its own instance: GET /{a}/{b} would otherwise also answer unknown two-segment paths, /_sim/x.
  const mediaRoutes = new Elysia()
    .onError(({ error }) => {
      if (error instanceof GraphError) return graphErrorResponse(error.graphCode, error.details);
      log(`unexpected error: ${describeFailure(error)}`);
      return graphErrorResponse(1);
    })
    .get(MEDIA_DOWNLOAD_PATH, ({ query, headers }) => {
      requireBearer(headers.authorization);
      const media = storedMedia(typeof query.mid === "string" ? query.mid : "");
      return new Response(media.bytes, {
        headers: {
          "content-type": media.mimeType,
          "content-length": String(media.bytes.byteLength),
        },
      });
    })
    .get("/:version/:nodeId", ({ params, headers, request }) => {
      if (!/^v[0-9]+\.[0-9]+$/.test(params.version)) return unknownPathResponse(request);
      requireBearer(headers.authorization);
      const mediaId = params.nodeId;
      const media = storedMedia(mediaId);
      const url = new URL(MEDIA_DOWNLOAD_PATH, request.url);
      url.searchParams.set("mid", mediaId);
      return {
        messaging_product: "whatsapp",
        url: url.toString(),
        mime_type: media.mimeType,
        sha256: media.sha256,
        file_size: media.bytes.byteLength,
        id: mediaId,
      };
    });

  function inboundMessage(request: InboundRequest, waId: string): InboundMessage {
    const base = {
      from: waId,
      id: request.id ?? newWamid(),
      timestamp: request.timestamp === undefined ? webhookTimestamp() : String(request.timestamp),
    };
    const media = () => {
      const sample = SAMPLE_MEDIA[request.type as keyof typeof SAMPLE_MEDIA];
      const given = request.media_base64 !== undefined;
      const bytes = given ? new Uint8Array(Buffer.from(request.media_base64!, "base64")) : sample.bytes;
      const mimeType = request.mime_type ?? sample.mimeType;
      const sha256 = createHash("sha256").update(bytes).digest("base64");
      return { id: keepMedia({ bytes, mimeType, sha256 }), mime_type: mimeType, sha256 };
    };
    const caption = request.caption === undefined ? {} : { caption: request.caption };
    switch (request.type) {
      case "text":
        if (request.text === undefined) throw new ControlError("type text needs text");
        return { ...base, type: "text", text: { body: request.text } };
      case "image":
        return { ...base, type: "image", image: { ...media(), ...caption } };
      case "video":
        return { ...base, type: "video", video: { ...media(), ...caption } };
      case "audio":
        return { ...base, type: "audio", audio: { ...media(), voice: true } };
      case "document": {
        const filename = request.filename === undefined ? {} : { filename: request.filename };
        return { ...base, type: "document", document: { ...media(), ...caption, ...filename } };
      }
      case "system": {
        const newWaId = request.new_wa_id === undefined ? {} : { new_wa_id: request.new_wa_id };
        const body = request.text ?? `${request.name ?? "The customer"} changed their phone number.`;
        return { ...base, type: "system", system: { body, type: "customer_changed_number", ...newWaId } };
      }
    }
  }

  /** The signed inbound-message webhook of a customer's message (POST /_sim/inbound, sandbox replies). */
  function inboundWebhook(request: InboundRequest) {
    const waId = request.from.replace(/^\+/, "");
    const message = inboundMessage(request, waId);
    // The provider sends no contact profile with system messages.
    const contacts =
      request.type === "system"
        ? {}
        : { contacts: [{ profile: { name: request.name ?? "Sim Customer" }, wa_id: waId }] };
    const webhook = buildWebhook(webhookAccount({ ...request, phoneNumberId: request.phone_number_id }), {
      ...contacts,
      messages: [message],
    });
    return { webhook, message, waId };
  }

  function webhookAccount(request: {
    phoneNumberId: string;
    waba_id?: string;
    display_phone_number?: string;
  }): WebhookAccount {
    return {
      wabaId: request.waba_id ?? SIMULATOR_WABA_ID,
      phoneNumberId: request.phoneNumberId,
      displayPhoneNumber: request.display_phone_number ?? SIMULATOR_DISPLAY_PHONE_NUMBER,
    };
  }

  function statusErrors(given: Static<typeof StatusRequest>["errors"]): StatusError[] {
    // A failed status always carries an error; "undeliverable" is the common one.
    return (given ?? [{ code: 131026 }]).map((error) => {
      const known = GRAPH_ERRORS[error.code];
      const title = error.title ?? known?.title ?? "Simulated error";
      return {
        code: error.code,
        title,
        message: error.message ?? title,
        error_data: { details: error.details ?? known?.details ?? title },
      };
    });
  }

  const controlRoutes = new Elysia({ prefix: "/_sim" })
    .onError(({ code, error }) => {
      if (error instanceof ControlError) return controlErrorResponse(error.message, error.status);
      if (code === "VALIDATION") {
        return controlErrorResponse(
          describeValidation(error, (path) => path.replace(/^\//, "").replaceAll("/", ".") || "request body"),
        );
      }
      if (code === "PARSE") return controlErrorResponse("The request body must be JSON.");
      log(`unexpected error: ${describeFailure(error)}`);
      return controlErrorResponse("The simulator failed; see its log.", 500);
    })
    .get("/health", () => ({ status: "ok" }))
    .post(
      "/inbound",
      async ({ body }) => {
        const misplaced = TYPE_SPECIFIC_FIELDS.find(
          (field) => body[field] !== undefined && !INBOUND_FIELDS[body.type].allowed.includes(field),
        );
        if (misplaced) throw new ControlError(`${misplaced} does not apply to type ${body.type}`);
        const { webhook, message, waId } = inboundWebhook(body);
        const outcome = await postWebhookOnce(webhook, body.phone_number_id);
        log(
          `inbound ${body.type} ${message.id} from ${waId}: webhook answered ${outcome.webhook_status ?? outcome.webhook_error}`,
        );
        return { id: message.id, ...outcome };
      },
      { body: InboundRequest },
    )
    .post(
      "/status",
      async ({ body }) => {
        const send = accepted.get(body.wamid);
        const phoneNumberId = body.phone_number_id ?? send?.phoneNumberId;
        const recipientId = body.recipient_id ?? send?.waId;
        if (!phoneNumberId || !recipientId) {
          throw new ControlError(`unknown wamid ${body.wamid}: give phone_number_id and recipient_id`);
        }
        if (body.errors && body.status !== "failed") throw new ControlError("errors go with status failed");
        const timestamp = body.timestamp === undefined ? webhookTimestamp() : String(body.timestamp);
        const errors = body.status === "failed" ? statusErrors(body.errors) : undefined;
        const webhook = buildWebhook(webhookAccount({ ...body, phoneNumberId }), {
          statuses: [statusUpdate(body.wamid, body.status, recipientId, timestamp, errors)],
        });
        const outcome = await postWebhookOnce(webhook, phoneNumberId);
        log(
          `status ${body.status} ${body.wamid}: webhook answered ${outcome.webhook_status ?? outcome.webhook_error}`,
        );
        return outcome;
      },
      { body: StatusRequest },
    )
    .get(
      "/sent",
      ({ query }) => {
        // `from`: the number of sends already read (a follower's position: sends are numbered from 0
        // in arrival order, forgotten ones included), so a long run reads each send once.
        const from = query.from === undefined ? 0 : Math.max(0, Number(query.from) - forgottenSends);
        const window = from > 0 ? sent.slice(from) : sent;
        return {
          data: query.phone_number_id
            ? window.filter((record) => record.phone_number_id === query.phone_number_id)
            : window,
          forgotten: forgottenSends,
          total: forgottenSends + sent.length,
        };
      },
      {
        query: t.Object({
          phone_number_id: t.Optional(t.String()),
          from: t.Optional(t.Numeric({ minimum: 0 })),
        }),
      },
    )
    .post(
      "/fail-next",
      ({ body }) => {
        for (let i = 0; i < body.count; i++) pendingFailures.push(body.code);
        log(`the next ${body.count} sends fail with ${body.code}`);
        return { pending_failures: pendingFailures.length };
      },
      { body: FailNextRequest },
    )
    .post(
      "/mps",
      ({ body }) => {
        mps = body.mps;
        buckets.clear();
        log(
          body.mps > 0
            ? `throughput limited to ${body.mps} sends per second per number`
            : "throughput unlimited",
        );
        return { mps };
      },
      { body: MpsRequest },
    )
    .post(
      "/slow-next",
      ({ body }) => {
        for (let i = 0; i < body.count; i++) pendingDelays.push(body.delay_ms);
        log(`the next ${body.count} sends answer after ${body.delay_ms} ms`);
        return { pending_delays: pendingDelays.length };
      },
      { body: SlowNextRequest },
    )
    .post("/reset", () => {
      sent.length = 0;
      forgottenSends = 0;
      accepted.clear();
      uploads.clear();
      inboundMedia.clear();
      inboundMediaBytes = 0;
      pendingFailures.length = 0;
      pendingDelays.length = 0;
      buckets.clear();
      statusRuns.abort();
      statusRuns = new AbortController();
      log("reset");
      return { reset: true };
    });

  const app = new Elysia({ normalize: false })
    .use(controlRoutes)
    .use(graphRoutes)
    .use(mediaRoutes)
    .onError(({ code, request }) => {
      if (code === "NOT_FOUND") return unknownPathResponse(request);
    });

  return {
    app,
    /** Cancels every scheduled status webhook; the caller stops the HTTP server. */
    stop() {
      statusRuns.abort();
    },
  };
}

export type Simulator = ReturnType<typeof createSimulator>;
