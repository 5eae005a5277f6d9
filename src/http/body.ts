import { ApiError } from "./errors.ts";

/**
 * The one body reader of every route: a size cap per route that holds for chunked bodies too, and a
 * JSON parser that refuses deep nesting before `JSON.parse` (a recursive parser or validator walks
 * 50,000 levels for 100 KB of brackets). Nothing here reads more than the cap, and nothing parses
 * what the route has not yet authenticated when it can authenticate raw bytes (the webhook).
 */

const KB = 1024;
const MB = 1024 * KB;

/** JSON and form bodies of the API (and the token endpoint). */
export const JSON_BODY_LIMIT = MB;
/** POST /v2/messages/batch: up to 1,000 sends (DESIGN §13). */
export const BATCH_BODY_LIMIT = 4 * MB;
/** A provider webhook batches up to 1,000 events; 3 MB leaves room. */
export const WEBHOOK_BODY_LIMIT = 3 * MB;
/** POST /v2/media: a 16 MB file plus the multipart envelope. */
export const MEDIA_BODY_LIMIT = 16 * MB + 64 * KB;
/** Panel forms, operator actions and anything else. */
export const FORM_BODY_LIMIT = 64 * KB;
/** Deeper JSON than any of our schemas needs; refused before it is parsed. */
export const MAX_JSON_DEPTH = 32;

export type BodyKind = "media" | "webhook" | "api" | "batch" | "form";

export interface BodyPolicy {
  kind: BodyKind;
  limit: number;
}

const POLICIES: Record<BodyKind, BodyPolicy> = {
  media: { kind: "media", limit: MEDIA_BODY_LIMIT },
  webhook: { kind: "webhook", limit: WEBHOOK_BODY_LIMIT },
  api: { kind: "api", limit: JSON_BODY_LIMIT },
  batch: { kind: "batch", limit: BATCH_BODY_LIMIT },
  form: { kind: "form", limit: FORM_BODY_LIMIT },
};

/** The cap and reading of a body kind (a route declares its kind: src/http/route-policy.ts). */
export function bodyPolicy(kind: BodyKind): BodyPolicy {
  return POLICIES[kind];
}

export function tooLargeError(policy: BodyPolicy): ApiError {
  return policy.kind === "media"
    ? new ApiError("file_too_large", "Files may be at most 16 MB.", { param: "file" })
    : new ApiError("request_too_large", `The request body may be at most ${sizeText(policy.limit)}.`);
}

function sizeText(bytes: number): string {
  return bytes >= MB ? `${Math.round(bytes / MB)} MB` : `${Math.round(bytes / KB)} KB`;
}

/** A declared Content-Length over the cap: refused before anything is read. */
export function declaredTooLarge(request: Request, policy: BodyPolicy): boolean {
  const declared = Number(request.headers.get("content-length") ?? 0);
  return Number.isFinite(declared) && declared > policy.limit;
}

/** Reads a body without ever holding more than `policy.limit` bytes (chunked bodies have no length). */
export async function readBodyCapped(request: Request, policy: BodyPolicy): Promise<Uint8Array> {
  if (!request.body) return new Uint8Array();
  // A declared length within the cap (declaredTooLarge ran first) bounds what HTTP/1.1 framing lets
  // arrive, so the body is read natively in one go: the stream reader below costs ~10% of the api's
  // CPU under load, for the chunked bodies only it has to guard.
  const declared = request.headers.get("content-length");
  if (declared !== null && !request.headers.has("transfer-encoding") && Number(declared) <= policy.limit) {
    return new Uint8Array(await request.arrayBuffer());
  }
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > policy.limit) {
      await reader.cancel().catch(() => {});
      throw tooLargeError(policy);
    }
    chunks.push(value);
  }
  return chunks.length === 1 && chunks[0] ? chunks[0] : Buffer.concat(chunks);
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The deepest nesting of arrays and objects in JSON text, stopping as soon as it passes `max`: one
 * pass over the bytes, no recursion, no allocation. Brackets inside strings do not count. Malformed
 * text is JSON.parse's to refuse; this only has to be right about well-formed nesting.
 */
export function jsonDepthExceeds(bytes: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) inString = true;
    else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) depth--;
  }
  return false;
}

/**
 * Strings Postgres cannot store: a NUL character (U+0000: no text or jsonb holds one) and a lone
 * UTF-16 surrogate (half of a pair, e.g. the JSON escape `\ud800` alone: jsonb refuses its escape,
 * text would silently hold U+FFFD). An integrator's request that carries one is refused with the
 * field named (`refuse`); what the provider sends is taken with U+FFFD in their place (`replace`),
 * since refusing it would only make the provider retry it for days.
 */
export type UnstorablePolicy = "refuse" | "replace";

const NUL = "\u0000";
const REPLACEMENT = "\uFFFD";
/** JSON text that may decode to an unstorable string: a NUL or a surrogate, written as an escape. */
const SUSPECT_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/;

export function isStorable(text: string): boolean {
  return !text.includes(NUL) && text.isWellFormed();
}

/** JSON text to a value, or `invalid_json`; empty text is no body (null). */
export function parseJsonBytes(bytes: Uint8Array, unstorable: UnstorablePolicy = "refuse"): unknown {
  if (jsonDepthExceeds(bytes, MAX_JSON_DEPTH)) {
    throw new ApiError("invalid_json", `The request body is nested deeper than ${MAX_JSON_DEPTH} levels.`);
  }
  // Bytes that are not UTF-8 decode to U+FFFD: only escapes can make a NUL or a lone surrogate.
  const text = new TextDecoder().decode(bytes);
  if (text.trim() === "") return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError("invalid_json", "The request body is not valid JSON.");
  }
  return SUSPECT_ESCAPE.test(text) ? storableValue(value, unstorable) : value;
}

/**
 * The value with its unstorable strings refused (the first one's path named) or replaced, object
 * keys included. Form and multipart fields go through it too (src/media/routes.ts).
 */
export function storableValue(value: unknown, unstorable: UnstorablePolicy, path: string[] = []): unknown {
  const clean = (text: string, at: string[]) => {
    if (isStorable(text)) return text;
    if (unstorable === "refuse") {
      const param = at.join(".") || null;
      const what = text.includes(NUL) ? "NUL characters (U+0000)" : "unpaired UTF-16 surrogates";
      throw new ApiError("parameter_invalid", `${param ?? "The request body"} must not contain ${what}.`, {
        param,
      });
    }
    return text.toWellFormed().replaceAll(NUL, REPLACEMENT);
  };
  if (typeof value === "string") return clean(value, path);
  if (Array.isArray(value))
    return value.map((item, i) => storableValue(item, unstorable, [...path, String(i)]));
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      const name = clean(key, [...path, key]);
      out[name] = storableValue(item, unstorable, [...path, name]);
    }
    return out;
  }
  return value;
}

export function mediaType(header: string | null): string {
  return (header ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

export function isJsonType(type: string): boolean {
  return type === "application/json" || type.endsWith("+json");
}

/** JSON or form-urlencoded bytes to the value a route sees; any other type with a body is refused. */
export function parseBodyBytes(type: string, bytes: Uint8Array): unknown {
  if (isJsonType(type)) return parseJsonBytes(bytes);
  if (type === "application/x-www-form-urlencoded") {
    const form = formToObject(new TextDecoder().decode(bytes));
    const storable = Object.entries(form).every(
      ([k, v]) => isStorable(k) && [v].flat().every((text) => isStorable(text)),
    );
    return storable ? form : storableValue(form, "refuse");
  }
  if (bytes.byteLength === 0) return null;
  throw new ApiError(
    "invalid_content_type",
    `Content-Type ${type || "(none)"} is not accepted here; send application/json.`,
  );
}

function formToObject(text: string): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [key, value] of new URLSearchParams(text)) {
    const prior = out[key];
    // Push, never copy: a field repeated 100,000 times must stay linear.
    if (prior === undefined) out[key] = value;
    else if (Array.isArray(prior)) prior.push(value);
    else out[key] = [prior, value];
  }
  return out;
}
