import { createHash, randomBytes } from "node:crypto";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import type { AuthContext } from "../http/request-state.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";

/**
 * Idempotency-Key (DESIGN §3, after Stripe and draft-ietf-httpapi-idempotency-key-header):
 * scoped to the application, kept 24 h, recorded in the same transaction as the message it
 * created (the unique key is the durable backstop), with Redis only as the fast path that also
 * tells a concurrent duplicate (409) from a finished one (replay). Only a newly accepted message
 * is recorded: an error does not consume the key.
 */

export const IDEMPOTENCY_RETENTION_MS = 24 * 3600 * 1000;
const IN_FLIGHT_MS = 30_000;
/** 1-255 printable ASCII characters (documented as the header's pattern). */
export const KEY_FORMAT = /^[\x20-\x7e]{1,255}$/;

export function parseIdempotencyKey(header: string | null): string | undefined {
  if (header === null) return undefined;
  if (!KEY_FORMAT.test(header)) {
    throw new ApiError("parameter_invalid", "Idempotency-Key must be 1 to 255 printable ASCII characters.", {
      param: "Idempotency-Key",
    });
  }
  return header;
}

/** Canonical JSON (keys sorted at every depth): the same request body always hashes the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

export function requestFingerprint(body: unknown): Buffer {
  return createHash("sha256").update(canonical(body)).digest();
}

export interface IdempotencyDeps {
  db: Db;
  redis: RedisClient;
  keys: RedisKeys;
}

export type IdempotencyClaim =
  | { kind: "replay"; messageId: string }
  | { kind: "new"; complete(messageId: string): Promise<void>; release(): Promise<void> };

interface Marker {
  /** p: a request is in flight; d: done, message created. */
  s: "p" | "d";
  h: string;
  m?: string;
  /** Owner token of an in-flight marker, so only its owner releases it. */
  t?: string;
}

function keyInUse(): ApiError {
  return new ApiError("idempotency_key_in_use", "A request with this Idempotency-Key is still in progress.", {
    param: "Idempotency-Key",
    headers: { "retry-after": "1" },
  });
}

/** Same key: the same body is a replay of the stored message, another body is refused. */
export function replayVerdict(
  stored: { hash: string; messageId: string },
  fingerprint: Buffer,
): { kind: "replay"; messageId: string } {
  if (stored.hash !== fingerprint.toString("hex")) {
    throw new ApiError(
      "idempotency_key_reused",
      "This Idempotency-Key was used with a different request body.",
      {
        param: "Idempotency-Key",
      },
    );
  }
  return { kind: "replay", messageId: stored.messageId };
}

/** The durable record, if a live one exists (Redis may have lost its marker). */
export async function findIdempotencyRecord(
  db: Db,
  clientId: string,
  key: string,
  now: Date,
): Promise<{ hash: string; messageId: string } | undefined> {
  const row = await db
    .selectFrom("idempotency_keys")
    .select(["request_hash", "message_id"])
    .where("application_id", "=", clientId)
    .where("key", "=", key)
    .where("created_at", ">", new Date(now.getTime() - IDEMPOTENCY_RETENTION_MS))
    .executeTakeFirst();
  return row && { hash: row.request_hash.toString("hex"), messageId: row.message_id };
}

export async function claimIdempotencyKey(
  deps: IdempotencyDeps,
  auth: AuthContext,
  key: string,
  fingerprint: Buffer,
): Promise<IdempotencyClaim> {
  const digest = createHash("sha256").update(key).digest("base64url");
  const redisKey = deps.keys.idempotency(auth.tenantId, auth.clientId, digest);
  const token = randomBytes(9).toString("base64url");
  const hash = fingerprint.toString("hex");
  const pending: Marker = { s: "p", h: hash, t: token };

  const claimed = await deps.redis.set(redisKey, JSON.stringify(pending), "PX", IN_FLIGHT_MS, "NX");
  if (claimed !== "OK") {
    const raw = await deps.redis.get(redisKey);
    const marker = raw ? (JSON.parse(raw) as Marker) : undefined;
    if (marker?.s === "d" && marker.m)
      return replayVerdict({ hash: marker.h, messageId: marker.m }, fingerprint);
    if (marker?.s === "p") {
      throw keyInUse();
    }
    // The marker expired between our two calls: take it now, or let the other claimant win.
    if ((await deps.redis.set(redisKey, JSON.stringify(pending), "PX", IN_FLIGHT_MS, "NX")) !== "OK") {
      throw keyInUse();
    }
  }

  // Redis may have restarted empty since an earlier request took this key: the record written with
  // the message (accept-batch.ts) is the backstop, and a conflict there turns into a replay.
  return {
    kind: "new",
    async complete(messageId) {
      const done: Marker = { s: "d", h: hash, m: messageId };
      await deps.redis.set(redisKey, JSON.stringify(done), "PX", IDEMPOTENCY_RETENTION_MS).catch(() => {});
    },
    async release() {
      const raw = await deps.redis.get(redisKey).catch(() => null);
      if (raw && (JSON.parse(raw) as Marker).t === token) await deps.redis.del(redisKey).catch(() => {});
    },
  };
}

/** Maintenance: records past retention are dropped. */
export async function deleteExpiredIdempotencyKeys(db: Db, now: Date): Promise<number> {
  const result = await db
    .deleteFrom("idempotency_keys")
    .where("created_at", "<", new Date(now.getTime() - IDEMPOTENCY_RETENTION_MS))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
