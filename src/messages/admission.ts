import { CHANNEL } from "../channel/provider.ts";
import { type Clock, utcDay } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { serviceUnavailable } from "../http/dependency-faults.ts";
import { ApiError } from "../http/errors.ts";
import { type RateLimitOutcome, rateLimitError, rateLimitHeaders } from "../http/rate-limit.ts";
import type {
  AdmittedSend,
  AuthContext,
  IdempotencyReservation,
  RequestState,
} from "../http/request-state.ts";
import type { Metrics, RateLimitKind } from "../metrics/index.ts";
import { coalesced } from "../redis/coalesce.ts";
import type { RedisClient, RedisKeys, ScriptCommands, SendAdmissionReply } from "../redis/connect.ts";
import { DIRECTORY_VERSION_TTL_SECONDS } from "../senders/directory-version.ts";
import { acceptedOnDay, tenantDailyQuota } from "../senders/quota.ts";
import type { AcceptOutboundMessage, AcceptOutcome } from "./accept.ts";
import {
  type AcceptBatch,
  type BatchAcceptorDeps,
  createBatchAcceptor,
  type QuotaReservation,
  type ReserveQuota,
} from "./batch.ts";
import {
  IN_FLIGHT_MS,
  idempotencyRedisKey,
  inFlightMarker,
  KEY_FORMAT,
  releaseIdempotencyMarker,
  releaseIdempotencyReservation,
} from "./idempotency.ts";
import type { SendMessageInput } from "./schemas.ts";

export interface SendAdmissionDeps {
  db: Db;
  redis: RedisClient;
  keys: RedisKeys;
  clock: Clock;
  metrics: Pick<Metrics, "rateLimited">;
  defaultDailyQuota: number;
}

/** An admitted send (see AdmittedSend), with the rate limit's outcome for the answer's headers. */
export interface SendAdmission extends AdmittedSend {
  rate: RateLimitOutcome;
}

const QUOTA_CACHE_MS = 30_000;
/** Sends of one tenant admitted by one script call at most (a turn of the event loop may hold more). */
const MAX_ADMISSIONS_A_CALL = 200;

/**
 * One send's part of a send_admission.lua call. A group (one tenant, day and seed) goes out with its
 * first call's first five: the others' are the same but `ttl`, a second or so apart, which only moves
 * the counter's expiry.
 */
interface AdmissionCall {
  quotaKey: string;
  versionKey: string;
  quota: number;
  ttl: number;
  seed: number;
  rateKey: string;
  claimKey: string;
  limit: number;
  marker: string;
}

/** The tenant's daily quota (src/senders/quota.ts), cached briefly. */
function cachedTenantQuota(deps: Pick<SendAdmissionDeps, "db" | "defaultDailyQuota">) {
  const quotaCache = new Map<string, { quota: number; until: number }>();
  return async function tenantQuota(tenantId: string): Promise<number> {
    const cached = quotaCache.get(tenantId);
    if (cached && cached.until > Date.now()) return cached.quota;
    const quota = await tenantDailyQuota(deps.db, tenantId, deps.defaultDailyQuota);
    quotaCache.set(tenantId, { quota, until: Date.now() + QUOTA_CACHE_MS });
    return quota;
  };
}

/**
 * The day's accepted messages counted in Postgres (the seed of a quota counter Redis lost), once
 * for all who ask at the same time: after a Redis restart every send of a turn asks at once.
 */
function sharedDayCount(db: Db) {
  const counting = new Map<string, Promise<number>>();
  return (tenantId: string, day: ReturnType<typeof utcDay>): Promise<number> => {
    const key = `${tenantId}\u0000${day.key}`;
    let count = counting.get(key);
    if (!count) {
      count = acceptedOnDay(db, tenantId, day).finally(() => counting.delete(key));
      counting.set(key, count);
    }
    return count;
  };
}

function quotaExceeded(quota: number, now: Date, dayEnd: Date): ApiError {
  const secondsToMidnight = Math.max(1, Math.ceil((dayEnd.getTime() - now.getTime()) / 1000));
  return new ApiError(
    "quota_exceeded",
    `The daily send quota of ${quota} messages is used up; it resets at 00:00 UTC.`,
    { headers: { "retry-after": String(secondsToMidnight) } },
  );
}

/**
 * One Redis script decides both limits and the key's claim (scripts/send_admission.lua), for the
 * sends of a turn of the event loop together. The tenant's quota is cached briefly; a counter Redis
 * lost is rebuilt from the day's accepted messages in Postgres.
 */
export function createSendAdmission(deps: SendAdmissionDeps) {
  const tenantQuota = cachedTenantQuota(deps);
  const dayCount = sharedDayCount(deps.db);
  // The sends of a turn of the event loop go to Redis together: one script call per tenant and day
  // (src/redis/coalesce.ts), its keys in the tenant's slot.
  const sendAdmission = coalesced<AdmissionCall, SendAdmissionReply>(deps.redis, {
    groupOf: (c) => `${c.quotaKey}\u0000${c.seed}`,
    keyOf: (c) => c.quotaKey,
    add: (commands, calls) => {
      const [first] = calls as [AdmissionCall];
      return (commands as unknown as ScriptCommands).sendAdmission(
        2 + 2 * calls.length,
        first.quotaKey,
        first.versionKey,
        ...calls.flatMap((c) => [c.rateKey, c.claimKey]),
        first.quota,
        first.ttl,
        first.seed,
        DIRECTORY_VERSION_TTL_SECONDS,
        IN_FLIGHT_MS,
        ...calls.flatMap((c) => [c.limit, c.marker]),
      );
    },
    maxCalls: MAX_ADMISSIONS_A_CALL,
  });

  /**
   * Reserves a send: the rate limit, a unit of the daily quota and, with `idempotency` (the request's
   * Idempotency-Key, already checked for format, and a token naming this request: its request id),
   * the key's claim, in one Redis call (shared with the turn's other sends). A refusal (429, or the
   * quota used up) is counted and thrown, with the RateLimit-* headers; `rateMessage` words the 429
   * for the caller (the panel).
   */
  return async function admitSend(
    auth: AuthContext,
    idempotency?: { key: string; token: string },
    rateMessage?: (limit: number) => string,
  ): Promise<SendAdmission> {
    const now = deps.clock.now();
    const day = utcDay(now);
    const rateKey = deps.keys.applicationRate(auth.tenantId, auth.clientId, "send");
    const quotaKey = deps.keys.dailyQuota(auth.tenantId, CHANNEL, day.key);
    const versionKey = deps.keys.directoryVersion(auth.tenantId);
    const idempotencyKey = idempotency && idempotencyRedisKey(deps.keys, auth, idempotency.key);
    const quota = await tenantQuota(auth.tenantId);
    const ttl = Math.ceil((day.end.getTime() - now.getTime()) / 1000) + 3600;
    const call = (seed: number) =>
      sendAdmission({
        rateKey,
        quotaKey,
        versionKey,
        // Without a key, any key of the tenant's slot stands in (the script leaves it alone).
        claimKey: idempotencyKey ?? rateKey,
        limit: auth.sendLimit,
        marker: idempotency ? inFlightMarker(idempotency.token) : "",
        quota,
        ttl,
        seed,
      }).catch(() => {
        // The script may have claimed the key before its answer was lost (a failover): the request
        // fails and created nothing, so its claim is given back once Redis answers again.
        if (idempotency && idempotencyKey)
          void releaseIdempotencyMarker(deps.redis, idempotencyKey, idempotency.token);
        throw serviceUnavailable();
      });

    let reply = await call(-1);
    if (reply[0] === 3) reply = await call(await dayCount(auth.tenantId, day));
    const [code, limit, remaining, resetMs, resetEpoch, , directoryVersion, marker] = reply;
    const rate = { allowed: code !== 0, limit, remaining, resetMs, resetEpoch };
    if (code === 0) {
      deps.metrics.rateLimited.inc({ kind: "send" satisfies RateLimitKind });
      throw withRateHeaders(rateLimitError(rate, rateMessage?.(limit)), rate);
    }
    if (code === 2) {
      deps.metrics.rateLimited.inc({ kind: "quota" satisfies RateLimitKind });
      throw withRateHeaders(quotaExceeded(quota, now, day.end), rate);
    }
    const reservation =
      idempotency && idempotencyKey
        ? {
            key: idempotency.key,
            redisKey: idempotencyKey,
            token: idempotency.token,
            ...(code === 4 ? { taken: marker ?? null, settled: true } : {}),
          }
        : undefined;
    // Code 4 (the key is taken): nothing was reserved, the request creates nothing new.
    return reserved(deps.redis, rate, directoryVersion, code === 1 ? quotaKey : undefined, reservation);
  };
}

/** The refusal's answer carries the limit's headers too (SPEC §8). */
function withRateHeaders(error: ApiError, rate: RateLimitOutcome): ApiError {
  Object.assign(error.headers, rateLimitHeaders(rate));
  return error;
}

/** What one admission reserved, settled once: kept, or given back (quota unit and key together). */
function reserved(
  redis: RedisClient,
  rate: RateLimitOutcome,
  directoryVersion: string,
  quotaKey: string | undefined,
  idempotency: IdempotencyReservation | undefined,
): SendAdmission {
  let settled = false;
  return {
    rate,
    directoryVersion,
    idempotency,
    keep() {
      settled = true;
    },
    async refund() {
      if (settled) return;
      settled = true;
      await Promise.all([
        // A unit not given back only undercounts the day's remaining quota by one.
        quotaKey ? redis.refundQuota(quotaKey).catch(() => {}) : undefined,
        idempotency ? releaseIdempotencyReservation(redis, idempotency) : undefined,
      ]);
    },
  };
}

export type AdmitSend = ReturnType<typeof createSendAdmission>;

/** Reserves up to `wanted` units of the tenant's daily quota in one Redis call (scripts/reserve_quota.lua). */
export function createQuotaReservation(deps: SendAdmissionDeps): ReserveQuota {
  const tenantQuota = cachedTenantQuota(deps);
  const dayCount = sharedDayCount(deps.db);
  return async function reserveQuota(auth: AuthContext, wanted: number): Promise<QuotaReservation> {
    const now = deps.clock.now();
    const day = utcDay(now);
    const quotaKey = deps.keys.dailyQuota(auth.tenantId, CHANNEL, day.key);
    const quota = await tenantQuota(auth.tenantId);
    const ttl = Math.ceil((day.end.getTime() - now.getTime()) / 1000) + 3600;
    const call = (seed: number) =>
      deps.redis
        .reserveQuota(
          quotaKey,
          deps.keys.directoryVersion(auth.tenantId),
          quota,
          ttl,
          seed,
          DIRECTORY_VERSION_TTL_SECONDS,
          wanted,
        )
        .catch(() => {
          throw serviceUnavailable();
        });
    let reply = await call(-1);
    if (reply[0] === 3) reply = await call(await dayCount(auth.tenantId, day));
    const [, granted, , directoryVersion] = reply;
    if (granted < wanted) deps.metrics.rateLimited.inc({ kind: "quota" satisfies RateLimitKind });
    return {
      granted,
      directoryVersion,
      exceeded: quotaExceeded(quota, now, day.end),
      async refund(units) {
        // A unit not given back only undercounts the day's remaining quota.
        if (units > 0) await deps.redis.refundQuota(quotaKey, units).catch(() => {});
      },
    };
  };
}

/**
 * Admits the send of a request (POST /messages): its Idempotency-Key, when well-formed, claimed under
 * the request's id (a malformed one is the route's 400), the limits' headers set, and the admission
 * kept in the request state to be settled by the route or refunded by the pipeline's error handler.
 */
export async function admitSendRequest(
  admitSend: AdmitSend,
  auth: AuthContext,
  request: Request,
  state: RequestState,
  set: { headers: Record<string, unknown> },
): Promise<void> {
  const key = request.headers.get("idempotency-key");
  const admission = await admitSend(
    auth,
    key !== null && KEY_FORMAT.test(key) ? { key, token: state.requestId } : undefined,
  );
  Object.assign(set.headers, rateLimitHeaders(admission.rate));
  state.admittedSend = admission;
}

/**
 * A process's one send path, shared by POST /v2/messages and the panel's replies: `admitSend`
 * reserves (in the pipeline, before the body is read), `acceptAdmitted` accepts and settles.
 */
export interface OutboundSending {
  admitSend: AdmitSend;
  acceptAdmitted(
    admitted: AdmittedSend | undefined,
    auth: AuthContext,
    input: SendMessageInput,
    idempotencyKey: string | undefined,
  ): Promise<AcceptOutcome>;
  /** POST /v2/messages/batch: each item through the same acceptor (src/messages/batch.ts). */
  acceptBatch: AcceptBatch;
}

export function outboundSending(
  admitSend: AdmitSend,
  accept: AcceptOutboundMessage,
  batch: Omit<BatchAcceptorDeps, "accept">,
): OutboundSending {
  return {
    admitSend,
    acceptBatch: createBatchAcceptor({ ...batch, accept }),
    /**
     * Only accepted sends count against the daily quota: a send that created a message keeps its
     * unit; a replay or a refusal gives it back (and its claimed key) before it answers.
     */
    async acceptAdmitted(admitted, auth, input, idempotencyKey) {
      let created = false;
      try {
        const outcome = await accept(
          auth,
          input,
          idempotencyKey,
          admitted?.directoryVersion,
          admitted?.idempotency,
        );
        created = !outcome.replayed;
        return outcome;
      } finally {
        if (created) admitted?.keep();
        else await admitted?.refund();
      }
    },
  };
}
