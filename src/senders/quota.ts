import { sql } from "kysely";
import type { AppDeps } from "../app-deps.ts";
import { CHANNEL } from "../channel/provider.ts";
import { utcDay } from "../clock.ts";
import type { Db } from "../db/connect.ts";

/**
 * The daily send quota, defined here once: a tenant's quota, and what it counts (the outbound
 * messages accepted on a UTC day). The send admission (src/messages/admission.ts) reserves units of
 * it in Redis and rebuilds a lost counter from `acceptedOnDay`; each API Sender and the panel's
 * Senders page show `dailyQuotaToday`.
 */

/** The tenant's daily send quota on CHANNEL today: what the panel's Senders page and each API Sender show. */
export interface DailyQuota {
  limit: number;
  used: number;
  /** 00:00 UTC of the next day. */
  resetsAt: Date;
}

type QuotaDeps = Pick<AppDeps, "db" | "redis" | "keys" | "clock" | "config">;

/** A UTC day (`utcDay`): from its 00:00, inclusive, to the next day's, exclusive. */
type Day = { start: Date; end: Date };

/**
 * A tenant's daily send quota: its own (`tenants.daily_quota`) when it has one, else the service's
 * (`DAILY_SEND_QUOTA`, `serviceDefault`).
 */
export function effectiveDailyQuota(own: number | null | undefined, serviceDefault: number): number {
  return own ?? serviceDefault;
}

/** A tenant's daily send quota (`effectiveDailyQuota`), read from Postgres. */
export async function tenantDailyQuota(db: Db, tenantId: string, serviceDefault: number): Promise<number> {
  const row = await db
    .selectFrom("tenants")
    .select("daily_quota")
    .where("id", "=", tenantId)
    .executeTakeFirst();
  return effectiveDailyQuota(row?.daily_quota, serviceDefault);
}

/** What the quota counts: the tenant's outbound messages created on the day (a send that created one). */
function acceptedOn(db: Db, tenantId: string, day: Day) {
  return db
    .selectFrom("messages")
    .where("tenant_id", "=", tenantId)
    .where("direction", "=", "outbound")
    .where("created_at", ">=", day.start)
    .where("created_at", "<", day.end);
}

/**
 * Outbound messages accepted on the given UTC day: the quota's use, as the admission rebuilds a
 * counter Redis lost. Read index-only from messages_tenant_created_idx (direction included).
 */
export async function acceptedOnDay(db: Db, tenantId: string, day: Day): Promise<number> {
  const row = await acceptedOn(db, tenantId, day)
    .select(sql<number>`count(*)::int`.as("n"))
    .executeTakeFirstOrThrow();
  return row.n;
}

/** Outbound messages accepted on the given UTC day, per sender (the tenant's only). */
export async function sentOnDayBySender(db: Db, tenantId: string, day: Day) {
  const rows = await acceptedOn(db, tenantId, day)
    .select(["sender_id", sql<number>`count(*)::int`.as("n")])
    .groupBy("sender_id")
    .execute();
  return new Map(rows.map((r) => [r.sender_id, r.n]));
}

/**
 * The day's quota counter as the send admission keeps it in Redis; without one (nothing sent yet
 * today, Redis lost it or is unreachable) the day's accepted messages in Postgres, which is what
 * the admission rebuilds the counter from. `counted` gives that Postgres count when it is needed.
 */
export async function dailyQuotaToday(
  deps: QuotaDeps,
  tenantId: string,
  counted?: () => Promise<number>,
): Promise<DailyQuota> {
  const now = deps.clock.now();
  const day = utcDay(now);
  const [limit, redisValue] = await Promise.all([
    tenantDailyQuota(deps.db, tenantId, deps.config.dailySendQuota),
    deps.redis.get(deps.keys.dailyQuota(tenantId, CHANNEL, day.key)).catch(() => null),
  ]);
  const fromRedis = redisValue === null ? Number.NaN : Number.parseInt(redisValue, 10);
  return {
    limit,
    used:
      Number.isFinite(fromRedis) && fromRedis >= 0
        ? fromRedis
        : await (counted ? counted() : acceptedOnDay(deps.db, tenantId, day)),
    resetsAt: day.end,
  };
}
