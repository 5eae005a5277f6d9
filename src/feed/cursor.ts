import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * `fd_` cursors (DESIGN §6 step 4): fixed-width base62 of version, key id, epoch and position, then a
 * truncated HMAC over those and the tenant id. Opaque to clients, unforgeable, and bound to one
 * tenant: another tenant's cursor fails the MAC like a tampered one.
 */

export interface FeedPosition {
  epoch: number;
  /** The last feed position the client has seen; 0 = before the first. */
  seq: number;
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const PREFIX = "fd_";
const VERSION = 1;
// Which derived key signed the cursor; a key rotation adds a key id and keeps accepting the old one.
const KEY_ID = 1;
const MAC_BYTES = 12;
// Widths in base62 digits: 62^6 > 2^31 (epoch is an int4), 62^11 > 2^63 (seq is an int8), 62^17 > 2^96.
const WIDTH = { version: 1, keyId: 1, epoch: 6, seq: 11, mac: 17 } as const;
const BODY_LENGTH = WIDTH.version + WIDTH.keyId + WIDTH.epoch + WIDTH.seq;
const CURSOR_PATTERN = new RegExp(`^${PREFIX}[0-9A-Za-z]{${BODY_LENGTH + WIDTH.mac}}$`);

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
  encode(tenantId: string, position: FeedPosition): string;
  /** Undefined for anything this service did not issue to this tenant. */
  decode(tenantId: string, cursor: string): FeedPosition | undefined;
}

/** The signing key is derived from `secret` (the JWT secret), so cursors need no key of their own. */
export function createFeedCursorCodec(secret: string): FeedCursorCodec {
  const key = createHmac("sha256", secret).update(`feed-cursor-key:${KEY_ID}`).digest();
  const mac = (body: string, tenantId: string) =>
    createHmac("sha256", key).update(`${PREFIX}${body}:${tenantId}`).digest().subarray(0, MAC_BYTES);

  return {
    encode(tenantId, position) {
      const body =
        encodeFixed(BigInt(VERSION), WIDTH.version) +
        encodeFixed(BigInt(KEY_ID), WIDTH.keyId) +
        encodeFixed(BigInt(position.epoch), WIDTH.epoch) +
        encodeFixed(BigInt(position.seq), WIDTH.seq);
      return `${PREFIX}${body}${encodeFixed(BigInt(`0x${mac(body, tenantId).toString("hex")}`), WIDTH.mac)}`;
    },
    decode(tenantId, cursor) {
      if (!CURSOR_PATTERN.test(cursor)) return undefined;
      const body = cursor.slice(PREFIX.length, PREFIX.length + BODY_LENGTH);
      let offset = 0;
      const field = (width: number) => {
        offset += width;
        return decodeFixed(body.slice(offset - width, offset));
      };
      const version = field(WIDTH.version);
      const keyId = field(WIDTH.keyId);
      const epoch = field(WIDTH.epoch);
      const seq = field(WIDTH.seq);
      if (version !== BigInt(VERSION) || keyId !== BigInt(KEY_ID)) return undefined;

      const given = decodeFixed(cursor.slice(PREFIX.length + BODY_LENGTH));
      if (given >= 1n << BigInt(MAC_BYTES * 8)) return undefined;
      const givenBytes = Buffer.from(given.toString(16).padStart(MAC_BYTES * 2, "0"), "hex");
      if (!timingSafeEqual(givenBytes, mac(body, tenantId))) return undefined;
      if (seq > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
      return { epoch: Number(epoch), seq: Number(seq) };
    },
  };
}
