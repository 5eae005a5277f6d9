import { createHash } from "node:crypto";
import { sql } from "kysely";
import type { Expiry } from "../db/batched-delete.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import type { AuthContext, IdempotencyReservation } from "../http/request-state.ts";
import { randomBase62 } from "../ids.ts";
import { pipelinePerSlot, type RedisClient, type RedisKeys } from "../redis/connect.ts";

/**
 * Idempotency-Key (DESIGN §3, after Stripe and draft-ietf-httpapi-idempotency-key-header):
 * scoped to the application, kept 24 h, recorded in the same transaction as the message it
 * created (the unique key is the durable backstop), with Redis only as the fast path that also
 * tells a concurrent duplicate (409) from a finished one (replay). Only a newly accepted message
 * is recorded: an error does not consume the key.
 */

export const IDEMPOTENCY_RETENTION_MS = 24 * 3600 * 1000;
export const IN_FLIGHT_MS = 30_000;
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

/**
 * Canonical JSON (keys sorted at every depth): the same request body always hashes the same. Built
 * by concatenation, without entry arrays: it runs for every send with an Idempotency-Key.
 */
function canonical(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "";
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) out += (i > 0 ? "," : "") + canonical(value[i]);
    return `${out}]`;
  }
  const object = value as Record<string, unknown>;
  let out = "{";
  for (const key of Object.keys(object).sort()) {
    const field = object[key];
    if (field === undefined) continue;
    out += `${out.length > 1 ? "," : ""}${JSON.stringify(key)}:${canonical(field)}`;
  }
  return `${out}}`;
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
  | {
      kind: "new";
      /** Where the done marker goes: written with the batch's commit (accept-batch.ts). */
      marker: IdempotencyMarkerTarget;
      complete(messageId: string): Promise<void>;
      release(): Promise<void>;
    };

/** The Redis key of one Idempotency-Key and the request hash its done marker records. */
export interface IdempotencyMarkerTarget {
  redisKey: string;
  hash: string;
}

interface Marker {
  /** p: a request is in flight; d: done, message created. */
  s: "p" | "d";
  /** The request's hash (done markers; in-flight ones from before the admission took keys too). */
  h?: string;
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

/** The Redis key of an Idempotency-Key (hashed: it is client-chosen, up to 255 characters). */
export function idempotencyRedisKey(keys: RedisKeys, auth: AuthContext, key: string): string {
  return keys.idempotency(auth.tenantId, auth.clientId, createHash("sha256").update(key).digest("base64url"));
}

/** The marker of a request in flight, naming its owner (the admission sets it, scripts/send_admission.lua). */
export function inFlightMarker(token: string): string {
  return `{"s":"p","t":${JSON.stringify(token)}}`;
}

export function doneMarker(hash: string, messageId: string): string {
  return JSON.stringify({ s: "d", h: hash, m: messageId } satisfies Marker);
}

/** A key someone else holds: its finished request is replayed, one still in flight is a 409. */
function takenVerdict(
  raw: string | null | undefined,
  fingerprint: Buffer,
): { kind: "replay"; messageId: string } {
  let marker: Marker | undefined;
  try {
    marker = raw ? (JSON.parse(raw) as Marker) : undefined;
  } catch {
    marker = undefined;
  }
  if (marker?.s === "d" && marker.m && marker.h)
    return replayVerdict({ hash: marker.h, messageId: marker.m }, fingerprint);
  throw keyInUse();
}

/** How soon a release that could not reach Redis is tried again. */
const RELEASE_RETRY_MS = 500;
/**
 * Releases being retried at once, at most: a failover leaves a few dozen; a long outage would leave one
 * per refused send, each polling Redis, and a claim not given back still expires by itself.
 */
const MAX_RETRIED_RELEASES = 1_000;
let retriedReleases = 0;

/** One attempt: false when Redis could not be reached. */
async function releaseOnce(redis: RedisClient, redisKey: string, token: string): Promise<boolean> {
  try {
    await redis.releaseClaim(redisKey, token);
    return true;
  } catch {
    return false;
  }
}

/**
 * Deletes an in-flight marker if it is still ours (a done marker, or another owner's, stays). While
 * Redis cannot be reached (a restart, a Cluster failover) the release is tried again in the
 * background until the marker would have expired anyway: a marker left behind would answer the
 * client's retries of its key 409 for the rest of IN_FLIGHT_MS, long after Redis is back.
 */
export async function releaseIdempotencyMarker(
  redis: RedisClient,
  redisKey: string,
  token: string,
): Promise<void> {
  if ((await releaseOnce(redis, redisKey, token)) || retriedReleases >= MAX_RETRIED_RELEASES) return;
  retriedReleases++;
  const until = Date.now() + IN_FLIGHT_MS;
  const retry = async () => {
    if ((await releaseOnce(redis, redisKey, token)) || Date.now() + RELEASE_RETRY_MS >= until)
      retriedReleases--;
    else setTimeout(retry, RELEASE_RETRY_MS).unref();
  };
  setTimeout(retry, RELEASE_RETRY_MS).unref();
}

/** A whole batch's done markers pipelined (accept-batch.ts, after its commit). */
export async function writeDoneMarkers(
  redis: RedisClient,
  done: readonly { target: IdempotencyMarkerTarget; messageId: string }[],
): Promise<void> {
  if (done.length === 0) return;
  await pipelinePerSlot(
    redis,
    done,
    ({ target }) => target.redisKey,
    (pipeline, { target, messageId }) =>
      pipeline.set(target.redisKey, doneMarker(target.hash, messageId), "PX", IDEMPOTENCY_RETENTION_MS),
  );
}

function newClaim(
  redis: RedisClient,
  reservation: IdempotencyReservation,
  fingerprint: Buffer,
): IdempotencyClaim {
  const marker = { redisKey: reservation.redisKey, hash: fingerprint.toString("hex") };
  // Redis may have restarted empty since an earlier request took this key: the record written with
  // the message (accept-batch.ts) is the backstop, and a conflict there turns into a replay.
  return {
    kind: "new",
    marker,
    async complete(messageId) {
      reservation.settled = true;
      await writeDoneMarkers(redis, [{ target: marker, messageId }]).catch(() => {});
    },
    release: () => releaseIdempotencyReservation(redis, reservation),
  };
}

/** Gives a claimed key back (its request created nothing), once. */
export async function releaseIdempotencyReservation(
  redis: RedisClient,
  reservation: IdempotencyReservation,
): Promise<void> {
  if (reservation.settled) return;
  reservation.settled = true;
  await releaseIdempotencyMarker(redis, reservation.redisKey, reservation.token);
}

/**
 * The claim the send admission already made in its Redis call (scripts/send_admission.lua): a key
 * found taken is a replay or a 409 now that the body's fingerprint is known.
 */
export function claimFromAdmission(
  redis: RedisClient,
  reservation: IdempotencyReservation,
  fingerprint: Buffer,
): IdempotencyClaim {
  if (reservation.taken !== undefined) return takenVerdict(reservation.taken, fingerprint);
  return newClaim(redis, reservation, fingerprint);
}

/**
 * Many keys claimed at once, one pipeline (POST /messages/batch): a reservation per key, as the send
 * admission makes for one (`taken` when someone holds it: claimFromAdmission replays it or answers
 * 409). The keys must be distinct.
 */
export async function claimIdempotencyKeys(
  deps: IdempotencyDeps,
  auth: AuthContext,
  keys: readonly string[],
): Promise<IdempotencyReservation[]> {
  const reservations: IdempotencyReservation[] = keys.map((key) => ({
    key,
    redisKey: idempotencyRedisKey(deps.keys, auth, key),
    token: randomBase62(12),
  }));
  // SET NX GET: the earlier marker comes back when the key is taken (Redis 7), nil when we took it.
  const replies = await pipelinePerSlot(
    deps.redis,
    reservations,
    (r) => r.redisKey,
    (pipeline, r) => pipeline.set(r.redisKey, inFlightMarker(r.token), "PX", IN_FLIGHT_MS, "NX", "GET"),
  );
  return reservations.map((reservation, i) => {
    const [error, previous] = replies[i]!;
    if (error) throw error;
    return previous === null ? reservation : { ...reservation, taken: previous as string, settled: true };
  });
}

/** The claim on its own (a caller whose admission did not take the key: the panel). */
export async function claimIdempotencyKey(
  deps: IdempotencyDeps,
  auth: AuthContext,
  key: string,
  fingerprint: Buffer,
): Promise<IdempotencyClaim> {
  const [reservation] = await claimIdempotencyKeys(deps, auth, [key]);
  return claimFromAdmission(deps.redis, reservation!, fingerprint);
}

/** Maintenance: records past retention are dropped, oldest first. */
export const IDEMPOTENCY_EXPIRY: Expiry = {
  keptMs: IDEMPOTENCY_RETENTION_MS,
  batch: 10_000,
  statement: (cutoff, batch) => sql`
    DELETE FROM idempotency_keys WHERE (application_id, key) IN (
      SELECT application_id, key FROM idempotency_keys WHERE created_at < ${cutoff}
      ORDER BY created_at LIMIT ${batch}
    )`,
};
