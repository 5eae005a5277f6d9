import { sql } from "kysely";
import type { AppDeps } from "../app-deps.ts";
import { CHANNEL } from "../channel/provider.ts";
import { utcDay } from "../clock.ts";
import { findTenant } from "../tenants/repository.ts";

/** The tenant's daily send quota on CHANNEL today: what the panel's Senders page and each API Sender show. */
export interface DailyQuota {
  limit: number;
  used: number;
  /** 00:00 UTC of the next day. */
  resetsAt: Date;
}

type QuotaDeps = Pick<AppDeps, "db" | "redis" | "keys" | "clock" | "config">;

/** Outbound messages accepted on the given UTC day, per sender (the tenant's only). */
export async function sentOnDayBySender(
  db: AppDeps["db"],
  tenantId: string,
  day: { start: Date; end: Date },
) {
  const rows = await db
    .selectFrom("messages")
    .select(["sender_id", sql<number>`count(*)::int`.as("n")])
    .where("tenant_id", "=", tenantId)
    .where("direction", "=", "outbound")
    .where("created_at", ">=", day.start)
    .where("created_at", "<", day.end)
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
  const countInPostgres = async () => {
    if (counted) return counted();
    const bySender = await sentOnDayBySender(deps.db, tenantId, day);
    return [...bySender.values()].reduce((sum, n) => sum + n, 0);
  };
  const [tenant, redisValue] = await Promise.all([
    findTenant(deps.db, tenantId),
    deps.redis.get(deps.keys.dailyQuota(tenantId, CHANNEL, day.key)).catch(() => null),
  ]);
  const fromRedis = redisValue === null ? Number.NaN : Number.parseInt(redisValue, 10);
  return {
    limit: tenant?.dailyQuota ?? deps.config.dailySendQuota,
    used: Number.isFinite(fromRedis) && fromRedis >= 0 ? fromRedis : await countInPostgres(),
    resetsAt: day.end,
  };
}
