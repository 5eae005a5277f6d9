import type { MediaTable } from "../db/schema.ts";

/**
 * What a file is, judged by its first bytes (DESIGN §3): never by the client's Content-Type or file
 * name, which say what the client believes, not what the recipient's phone will have to open.
 */

/** The Media object's `type`: what the file is to the recipient (its MIME type is separate). */
export type MediaKind = MediaTable["type"];

export interface SniffedMedia {
  type: MediaKind;
  mimeType: string;
}

/** Enough for every signature below, including an ISO-BMFF `ftyp` box with a few compatible brands. */
export const SNIFF_BYTES = 64;

const PDF = bytesOf("%PDF-");
const JPEG = [0xff, 0xd8, 0xff];
const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

// ISO base media file format brands (ISO/IEC 14496-12 `ftyp`): 3GPP/3GPP2 and the MP4 family.
const THREE_GPP_BRANDS = new Set([
  "3gp4",
  "3gp5",
  "3gp6",
  "3gp7",
  "3gp8",
  "3gp9",
  "3gr6",
  "3gs6",
  "3ge6",
  "3gg6",
  "3g2a",
  "3g2b",
  "3g2c",
]);
const MP4_BRANDS = new Set([
  "isom",
  "iso2",
  "iso3",
  "iso4",
  "iso5",
  "iso6",
  "mp41",
  "mp42",
  "mp71",
  "avc1",
  "M4V ",
  "M4VH",
  "M4VP",
  "dash",
  "MSNV",
]);

export function sniffMedia(head: Uint8Array): SniffedMedia | undefined {
  if (startsWith(head, PDF)) return { type: "document", mimeType: "application/pdf" };
  if (startsWith(head, JPEG)) return { type: "image", mimeType: "image/jpeg" };
  if (startsWith(head, PNG)) return { type: "image", mimeType: "image/png" };
  return sniffVideo(head);
}

/**
 * An `ftyp` box at offset 4: its major brand decides; a major brand we do not know (a camera
 * maker's own, say) falls back to the first compatible brand we do know.
 */
function sniffVideo(head: Uint8Array): SniffedMedia | undefined {
  if (head.length < 12 || textAt(head, 4) !== "ftyp") return undefined;
  const boxSize = new DataView(head.buffer, head.byteOffset, head.byteLength).getUint32(0);
  // Compatible brands follow the major brand (8) and the minor version (12).
  const brands = [textAt(head, 8)];
  for (let offset = 16; offset + 4 <= Math.min(boxSize, head.length); offset += 4) {
    brands.push(textAt(head, offset));
  }
  for (const brand of brands) {
    if (THREE_GPP_BRANDS.has(brand)) return { type: "video", mimeType: "video/3gpp" };
    if (MP4_BRANDS.has(brand)) return { type: "video", mimeType: "video/mp4" };
  }
  return undefined;
}

function startsWith(head: Uint8Array, signature: readonly number[]): boolean {
  return head.length >= signature.length && signature.every((byte, index) => head[index] === byte);
}

function textAt(head: Uint8Array, offset: number): string {
  return String.fromCharCode(...head.subarray(offset, offset + 4));
}

function bytesOf(text: string): number[] {
  return Array.from(text, (char) => char.charCodeAt(0));
}
