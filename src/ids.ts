/** Id prefixes (SPEC §1). Ids are prefix + 22 base62 characters from a CSPRNG (DESIGN §3). */
export type IdPrefix =
  | "msg"
  | "ctc"
  | "snd"
  | "tpl"
  | "med"
  | "req"
  | "cid"
  | "csec"
  | "ten"
  | "usr"
  | "evt"
  | "we";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

// Random bytes are drawn from the CSPRNG 4 KiB at a time and handed out in order: one call into
// the generator per ~150 ids instead of one per id. Each byte is used once.
const POOL_SIZE = 4096;
const pool = new Uint8Array(POOL_SIZE);
let poolAt = POOL_SIZE;

function nextRandomByte(): number {
  if (poolAt === POOL_SIZE) {
    crypto.getRandomValues(pool);
    poolAt = 0;
  }
  return pool[poolAt++]!;
}

/** Uniform base62 string by rejection sampling (248 = 4 * 62, so no modulo bias). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    const byte = nextRandomByte();
    if (byte < 248) out += BASE62[byte % 62];
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
