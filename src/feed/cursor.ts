import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { deriveKey } from "../crypto/keys.ts";
import { ApiError } from "../http/errors.ts";

/**
 * `fd_` cursors (DESIGN §6 step 4): fixed-width base62 of version, key id, epoch and position, then a
 * truncated HMAC over those and the tenant id. Opaque to clients, unforgeable, and bound to one
 * tenant: another tenant's cursor fails the MAC like a tampered one.
 *
 * Version 2 signs with the root secret's HKDF "feed-cursor" key and names it by a key id (a
 * fingerprint of the key), so a rotated root secret kept in PREVIOUS_JWT_SECRETS still opens the
 * cursors clients stored for days. Version 1 (key id 1, an HMAC-derived key) is still read.
 */

export interface FeedPosition {
  epoch: number;
  /** The last feed position the client has seen; 0 = before the first. */
  seq: number;
}

/** A kind of cursor the service issues: its prefix, and what it is and where a client gets one (for errors). */
export interface CursorKind {
  prefix: string;
  name: string;
  source: string;
}

/**
 * Every kind of cursor the service issues, in one place, so that a cursor given where another kind is
 * taken is named for what it is (a feed cursor passed to GET /v2/events, or the converse).
 */
export const CURSOR_KINDS = {
  feed: { prefix: "fd_", name: "a feed cursor", source: "the next_cursor of GET /v2/messages" },
  event: {
    prefix: "evc_",
    name: "an event cursor",
    source: "the next_cursor of GET /v2/events, or a webhook endpoint's delivery.cursor",
  },
} as const satisfies Record<string, CursorKind>;

/**
 * The 400 for a cursor a codec of `kind` did not open: another kind's cursor is named as such; else it
 * is garbage, tampered with, signed by a secret no longer kept, or another account's.
 */
export function cursorRefused(kind: CursorKind, param: string, given: string): ApiError {
  const other = Object.values(CURSOR_KINDS).find(
    (candidate) => candidate.prefix !== kind.prefix && given.startsWith(candidate.prefix),
  );
  const message = other
    ? `${param} is ${other.name} (${other.prefix}…, ${other.source}); ${param} here takes ${kind.name} (${kind.prefix}…): ${kind.source}.`
    : `${param} is not ${kind.name} this service gave this account; pass ${kind.source}.`;
  return new ApiError("parameter_invalid", message, { param });
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const VERSION = 2;
const LEGACY_VERSION = 1;
const LEGACY_KEY_ID = 1;
const MAC_BYTES = 12;
// Widths in base62 digits: 62^6 > 2^31 (epoch is an int4), 62^11 > 2^63 (seq is an int8), 62^17 > 2^96.
const WIDTH = { version: 1, keyId: 1, epoch: 6, seq: 11, mac: 17 } as const;
const BODY_LENGTH = WIDTH.version + WIDTH.keyId + WIDTH.epoch + WIDTH.seq;

function encodeFixed(value: bigint, width: number): string {
  let out = "";
  let rest = value;
  for (let i = 0; i < width; i++) {
    out = BASE62[Number(rest % 62n)] + out;
    rest /= 62n;
  }
  if (rest !== 0n) throw new RangeError(`${value} does not fit ${width} base62 digits`);
  return out;
}

function decodeFixed(digits: string): bigint {
  let value = 0n;
  for (const digit of digits) value = value * 62n + BigInt(BASE62.indexOf(digit));
  return value;
}

export interface FeedCursorCodec {
  /** Which cursors it reads and writes. */
  kind: CursorKind;
  encode(tenantId: string, position: FeedPosition): string;
  /** Undefined for anything this service did not issue to this tenant. */
  decode(tenantId: string, cursor: string): FeedPosition | undefined;
}

interface CursorKey {
  version: number;
  id: number;
  key: Buffer;
}

/** One base62 digit from 1 to 61 naming the key; two keys may share one (decode tries both). */
function keyIdOf(key: Buffer): number {
  return 1 + ((createHash("sha256").update(key).digest()[0] ?? 0) % 61);
}

function currentKey(rootSecret: string): CursorKey {
  const key = deriveKey(rootSecret, "feed-cursor");
  return { version: VERSION, id: keyIdOf(key), key };
}

/** Version 1's key, as cursors issued before per-purpose keys were signed. */
function legacyKey(rootSecret: string): CursorKey {
  const key = createHmac("sha256", rootSecret).update(`feed-cursor-key:${LEGACY_KEY_ID}`).digest();
  return { version: LEGACY_VERSION, id: LEGACY_KEY_ID, key };
}

/**
 * Keys are derived from the root secret (JWT_SECRET), so cursors need no secret of their own. Encodes
 * with `secret`; decodes what `secret` or any of `previousSecrets` signed, in either version. The
 * event log's cursors (`evc_`, src/events/) are the same with their own prefix, which the MAC covers:
 * a feed cursor is no event cursor.
 */
export function createFeedCursorCodec(
  secret: string,
  previousSecrets: string[] = [],
  kind: CursorKind = CURSOR_KINDS.feed,
): FeedCursorCodec {
  const { prefix } = kind;
  const pattern = new RegExp(`^${prefix}[0-9A-Za-z]{${BODY_LENGTH + WIDTH.mac}}$`);
  const signing = currentKey(secret);
  const secrets = [secret, ...previousSecrets];
  const accepted = [...secrets.map(currentKey), ...secrets.map(legacyKey)];
  const mac = (key: Buffer, body: string, tenantId: string) =>
    createHmac("sha256", key).update(`${prefix}${body}:${tenantId}`).digest().subarray(0, MAC_BYTES);

  return {
    kind,
    encode(tenantId, position) {
      const body =
        encodeFixed(BigInt(signing.version), WIDTH.version) +
        encodeFixed(BigInt(signing.id), WIDTH.keyId) +
        encodeFixed(BigInt(position.epoch), WIDTH.epoch) +
        encodeFixed(BigInt(position.seq), WIDTH.seq);
      const signature = mac(signing.key, body, tenantId).toString("hex");
      return `${prefix}${body}${encodeFixed(BigInt(`0x${signature}`), WIDTH.mac)}`;
    },
    decode(tenantId, cursor) {
      if (!pattern.test(cursor)) return undefined;
      const body = cursor.slice(prefix.length, prefix.length + BODY_LENGTH);
      let offset = 0;
      const field = (width: number) => {
        offset += width;
        return decodeFixed(body.slice(offset - width, offset));
      };
      const version = field(WIDTH.version);
      const keyId = field(WIDTH.keyId);
      const epoch = field(WIDTH.epoch);
      const seq = field(WIDTH.seq);
      const candidates = accepted.filter(
        (key) => BigInt(key.version) === version && BigInt(key.id) === keyId,
      );
      if (candidates.length === 0) return undefined;

      const given = decodeFixed(cursor.slice(prefix.length + BODY_LENGTH));
      if (given >= 1n << BigInt(MAC_BYTES * 8)) return undefined;
      const givenBytes = Buffer.from(given.toString(16).padStart(MAC_BYTES * 2, "0"), "hex");
      if (!candidates.some(({ key }) => timingSafeEqual(givenBytes, mac(key, body, tenantId))))
        return undefined;
      if (seq > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
      return { epoch: Number(epoch), seq: Number(seq) };
    },
  };
}
