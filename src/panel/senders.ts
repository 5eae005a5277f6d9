import { Elysia } from "elysia";
import { sql } from "kysely";
import type { AppDeps } from "../app-deps.ts";
import { CHANNEL, utcDay } from "../messages/admission.ts";
import { listTenantSenders } from "../senders/repository.ts";
import { listTenantTemplates, type TemplateRow } from "../templates/repository.ts";
import { findTenant } from "../tenants/repository.ts";
import { PANEL_PREFIX } from "./paths.ts";
import { type ChannelQuota, type SenderView, sendersPage } from "./senders-view.ts";
import { htmlResponse, signedIn } from "./web.ts";

/** Senders (connected numbers), their templates, and today's quota use. */
export function senderPages(deps: AppDeps) {
  /** Every template of the tenant's senders but the DELETED ones (gone at the provider), by name. */
  async function templatesBySender(tenantId: string): Promise<Map<string, TemplateRow[]>> {
    const rows = await listTenantTemplates(deps.db, tenantId);
    const out = new Map<string, TemplateRow[]>();
    for (const row of rows) {
      const list = out.get(row.sender_id) ?? [];
      list.push(row);
      out.set(row.sender_id, list);
    }
    return out;
  }

  /** Outbound messages accepted today, per sender (the tenant's only). */
  async function sentTodayBySender(tenantId: string, day: { start: Date; end: Date }) {
    const rows = await deps.db
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
   * the admission rebuilds the counter from.
   */
  async function usedToday(tenantId: string, dayKey: string, postgresCount: number): Promise<number> {
    try {
      const value = await deps.redis.get(deps.keys.dailyQuota(tenantId, CHANNEL, dayKey));
      const counted = value === null ? Number.NaN : Number.parseInt(value, 10);
      return Number.isFinite(counted) && counted >= 0 ? counted : postgresCount;
    } catch {
      return postgresCount;
    }
  }

  return new Elysia({ prefix: PANEL_PREFIX }).get(
    "/senders",
    signedIn(deps, async ({ session, csrf }) => {
      const tenantId = session.tenantId;
      const now = deps.clock.now();
      const day = utcDay(now);
      const [senders, templates, sentToday, tenant] = await Promise.all([
        listTenantSenders(deps.db, tenantId),
        templatesBySender(tenantId),
        sentTodayBySender(tenantId, day),
        findTenant(deps.db, tenantId),
      ]);
      const views: SenderView[] = senders.map((sender) => ({
        sender,
        templates: templates.get(sender.id) ?? [],
        sentToday: sentToday.get(sender.id) ?? 0,
      }));
      // The quota is the tenant's per channel; every sender of this service is on CHANNEL.
      const counted = senders.reduce((sum, s) => sum + (sentToday.get(s.id) ?? 0), 0);
      const quota: ChannelQuota = {
        channel: CHANNEL,
        used: await usedToday(tenantId, day.key, counted),
        quota: tenant?.dailyQuota ?? deps.config.dailySendQuota,
        resetsInSeconds: Math.max(60, Math.ceil((day.end.getTime() - now.getTime()) / 1000)),
      };
      return htmlResponse(sendersPage({ session, csrf, now, senders: views, quotas: [quota] }));
    }),
  );
}
