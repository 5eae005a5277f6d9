import type { DownloadedMedia } from "../channel/provider.ts";
import { mediaExtension } from "../channel/webhook-events.ts";
import type { InboundMediaSource } from "./conversation-data.ts";

/**
 * A received message's media as the panel serves it (issue 24): fetched from the provider when a
 * person opens it, never stored. Pictures of the types every browser draws are shown inline; anything
 * else is a download. Either way the answer is inert: `nosniff`, a sandboxing CSP, private caching.
 */

/** Shown inline (the thumbnail and the full picture); any other type is an attachment. */
const INLINE_IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/webp", "image/gif"]);
const FILENAME_MAX_CHARS = 120;

/** `image/jpeg; foo=bar` -> image/jpeg; undefined for anything that is not a plain type/subtype. */
function baseType(contentType: string): string | undefined {
  const base = contentType.split(";")[0]!.trim().toLowerCase();
  return /^[a-z]+\/[a-z0-9.+-]+$/.test(base) ? base : undefined;
}

/**
 * A name that is safe in a header and on a disk: no directories, control or bidirectional-override
 * characters, quotes or characters file systems refuse, no leading dots, at most 120 characters;
 * `fallback` when nothing is left.
 */
export function safeFilename(name: string | null | undefined, fallback: string): string {
  const base = (name ?? "").split(/[/\\]/).pop() ?? "";
  const cleaned = base
    .normalize("NFC")
    .replace(/[\p{Cc}\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu, "")
    .replace(/["*:<>?|;]/g, "_")
    .replace(/\s+/g, " ")
    .trim()
    .replace(/^\.+/, "");
  const short = [...cleaned].slice(0, FILENAME_MAX_CHARS).join("").trim();
  return short === "" ? fallback : short;
}

/** `attachment; filename="invoice.pdf"; filename*=UTF-8''invoice.pdf` (RFC 6266 with RFC 8187). */
function contentDisposition(kind: "inline" | "attachment", filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]/g, "_").replace(/[\\"]/g, "_");
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16)}`);
  return `${kind}; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/** The answer of GET /panel/conversations/:contactId/messages/:messageId/media. */
export function mediaResponse(source: InboundMediaSource, media: DownloadedMedia): Response {
  const type = baseType(media.contentType);
  const inline = type !== undefined && INLINE_IMAGE_TYPES.has(type);
  const fallback = `${source.mediaType ?? "file"}.${mediaExtension(type)}`;
  const filename = safeFilename(source.mediaFilename ?? media.filename, fallback);
  return new Response(media.bytes, {
    headers: {
      "content-type": type ?? "application/octet-stream",
      "content-length": String(media.bytes.byteLength),
      "content-disposition": contentDisposition(inline ? "inline" : "attachment", filename),
      "x-content-type-options": "nosniff",
      "content-security-policy": "sandbox; default-src 'none'",
      // The customer's file, behind the session: the browser may keep it a while, no one else.
      "cache-control": "private, max-age=300",
      "referrer-policy": "same-origin",
    },
  });
}
