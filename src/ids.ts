import { randomBytes } from "node:crypto";

/** Id prefixes (SPEC §1). Ids are prefix + 22 base62 characters from a CSPRNG (DESIGN §3). */
export type IdPrefix = "msg" | "ctc" | "snd" | "tpl" | "med" | "req" | "cid" | "csec" | "ten" | "usr" | "evt";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Uniform base62 string by rejection sampling (248 = 4 * 62, so no modulo bias). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export function newId(prefix: IdPrefix, length = 22): string {
  return `${prefix}_${randomBase62(length)}`;
}

/** True when value looks like an id of that prefix; says nothing about existence. */
export function isId(value: string, prefix: IdPrefix): boolean {
  return value.startsWith(`${prefix}_`) && /^[0-9A-Za-z]{1,64}$/.test(value.slice(prefix.length + 1));
}
