import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { CHANNEL } from "../channel/provider.ts";
import { utcDay } from "../clock.ts";
import { dailyQuotaToday, sentOnDayBySender } from "../senders/quota.ts";
import { listTenantSenders } from "../senders/repository.ts";
import { listTenantTemplates, type TemplateRow } from "../templates/repository.ts";
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

  return new Elysia({ prefix: PANEL_PREFIX }).get(
    "/senders",
    signedIn(deps, async ({ session, csrf }) => {
      const tenantId = session.tenantId;
      const now = deps.clock.now();
      const day = utcDay(now);
      const [senders, templates, sentToday] = await Promise.all([
        listTenantSenders(deps.db, tenantId),
        templatesBySender(tenantId),
        sentOnDayBySender(deps.db, tenantId, day),
      ]);
      const views: SenderView[] = senders.map((sender) => ({
        sender,
        templates: templates.get(sender.id) ?? [],
        sentToday: sentToday.get(sender.id) ?? 0,
      }));
      // The quota is the tenant's per channel; every sender of this service is on CHANNEL.
      const counted = senders.reduce((sum, s) => sum + (sentToday.get(s.id) ?? 0), 0);
      const today = await dailyQuotaToday(deps, tenantId, async () => counted);
      const quota: ChannelQuota = {
        channel: CHANNEL,
        used: today.used,
        quota: today.limit,
        resetsInSeconds: Math.max(60, Math.ceil((today.resetsAt.getTime() - now.getTime()) / 1000)),
      };
      return htmlResponse(sendersPage({ session, csrf, now, senders: views, quotas: [quota] }));
    }),
  );
}
