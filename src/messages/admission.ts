import { sql } from "kysely";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { serviceUnavailable } from "../http/dependency-faults.ts";
import { ApiError } from "../http/errors.ts";
import { type RateLimitOutcome, rateLimitError } from "../http/rate-limit.ts";
import type { AuthContext, IdempotencyReservation } from "../http/request-state.ts";
import type { Metrics, RateLimitKind } from "../metrics/index.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import { DIRECTORY_VERSION_TTL_SECONDS } from "../senders/directory-version.ts";
import type { AcceptOutboundMessage } from "./accept.ts";
import { IN_FLIGHT_MS, idempotencyRedisKey, inFlightMarker } from "./idempotency.ts";

export const CHANNEL = "whatsapp";

export interface SendAdmissionDeps {
  db: Db;
  redis: RedisClient;
  keys: RedisKeys;
  clock: Clock;
  defaultDailyQuota: number;
}

export interface SendAdmission {
  rate: RateLimitOutcome;
  /** The quota counter a unit was reserved on; give it back unless a message was accepted. */
  reservedQuotaKey?: string;
  /** Set when the daily quota is used up (`quota_exceeded`; the rate limit is in `rate`). */
  refusal?: ApiError;
  /**
   * The tenant's directory version, read in the same Redis call: the acceptor reuses its cached
   * senders and templates only while this is the version they were loaded at.
   */
  directoryVersion: string;
  /**
   * The Idempotency-Key, when one was given and the send is admitted: claimed in the same Redis
   * call, or found taken (then no quota unit was reserved: the request creates nothing new).
   */
  idempotency?: IdempotencyReservation;
}

const DAY_MS = 86_400_000;
const QUOTA_CACHE_MS = 30_000;

/** The UTC day the daily quota counts (its key names the day YYYYMMDD); the panel shows the same. */
export function utcDay(date: Date): { key: string; start: Date; end: Date } {
  const start = new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()));
  return {
    key: start.toISOString().slice(0, 10).replaceAll("-", ""),
    start,
    end: new Date(start.getTime() + DAY_MS),
  };
}

/**
 * One Redis call per send decides both limits (scripts/send_admission.lua). The tenant's quota is
 * cached briefly; a counter Redis lost is rebuilt from the day's accepted messages in Postgres.
 */
export function createSendAdmission(deps: SendAdmissionDeps) {
  const quotaCache = new Map<string, { quota: number; until: number }>();

  async function tenantQuota(tenantId: string): Promise<number> {
    const cached = quotaCache.get(tenantId);
    if (cached && cached.until > Date.now()) return cached.quota;
    const row = await deps.db
      .selectFrom("tenants")
      .select("daily_quota")
      .where("id", "=", tenantId)
      .executeTakeFirst();
    const quota = row?.daily_quota ?? deps.defaultDailyQuota;
    quotaCache.set(tenantId, { quota, until: Date.now() + QUOTA_CACHE_MS });
    return quota;
  }

  async function acceptedToday(tenantId: string, day: { start: Date; end: Date }): Promise<number> {
    const row = await deps.db
      .selectFrom("messages")
      .select(sql<number>`count(*)::int`.as("n"))
      .where("tenant_id", "=", tenantId)
      .where("direction", "=", "outbound")
      .where("created_at", ">=", day.start)
      .where("created_at", "<", day.end)
      .executeTakeFirstOrThrow();
    return row.n;
  }

  /**
   * `idempotency`: the request's Idempotency-Key (already checked for format) and a token naming
   * this request (its request id), to claim the key in the same call.
   */
  return async function admitSend(
    auth: AuthContext,
    idempotency?: { key: string; token: string },
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
      deps.redis
        .sendAdmission(
          rateKey,
          quotaKey,
          versionKey,
          // Without a key, any key of the tenant's slot stands in (the script leaves it alone).
          idempotencyKey ?? rateKey,
          auth.sendLimit,
          quota,
          ttl,
          seed,
          DIRECTORY_VERSION_TTL_SECONDS,
          IN_FLIGHT_MS,
          idempotency ? inFlightMarker(idempotency.token) : "",
        )
        .catch(() => {
          throw serviceUnavailable(1);
        });

    let reply = await call(-1);
    if (reply[0] === 3) reply = await call(await acceptedToday(auth.tenantId, day));
    const [code, limit, remaining, resetMs, resetEpoch, , directoryVersion, marker] = reply;
    const rate = { allowed: code !== 0, limit, remaining, resetMs, resetEpoch };
    if (code === 2) {
      const secondsToMidnight = Math.max(1, Math.ceil((day.end.getTime() - now.getTime()) / 1000));
      return {
        rate,
        directoryVersion,
        refusal: new ApiError(
          "quota_exceeded",
          `The daily send quota of ${quota} messages is used up; it resets at 00:00 UTC.`,
          { headers: { "retry-after": String(secondsToMidnight) } },
        ),
      };
    }
    const reservation =
      idempotency && idempotencyKey && (code === 1 || code === 4)
        ? {
            key: idempotency.key,
            redisKey: idempotencyKey,
            token: idempotency.token,
            ...(code === 4 ? { taken: marker ?? null, settled: true } : {}),
          }
        : undefined;
    return {
      rate,
      directoryVersion,
      reservedQuotaKey: code === 1 ? quotaKey : undefined,
      idempotency: reservation,
    };
  };
}

export type AdmitSend = ReturnType<typeof createSendAdmission>;

/** A process's one send path: admission (limits) and acceptance, shared by the API and the panel. */
export interface OutboundSending {
  admitSend: AdmitSend;
  acceptOutboundMessage: AcceptOutboundMessage;
}

/**
 * The admission's verdict for any sender (an API request, a panel reply): the 429 or the quota
 * refusal is thrown and counted; otherwise the quota key a unit was reserved on, to give back with
 * `giveBackQuotaUnit` unless a message is accepted. `rateMessage` words the 429 for the caller.
 */
export function enforceAdmission(
  admission: SendAdmission,
  metrics: Pick<Metrics, "rateLimited">,
  rateMessage?: (limit: number) => string,
): string | undefined {
  if (!admission.rate.allowed) {
    metrics.rateLimited.inc({ kind: "send" satisfies RateLimitKind });
    throw rateLimitError(admission.rate, rateMessage?.(admission.rate.limit));
  }
  if (admission.refusal) {
    metrics.rateLimited.inc({ kind: "quota" satisfies RateLimitKind });
    throw admission.refusal;
  }
  return admission.reservedQuotaKey;
}

/** Only accepted sends count against the daily quota; a send that created nothing returns its unit. */
export async function giveBackQuotaUnit(redis: RedisClient, quotaKey: string): Promise<void> {
  await redis.decr(quotaKey).catch(() => {});
}
