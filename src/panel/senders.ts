import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { CHANNEL } from "../channel/provider.ts";
import { utcDay } from "../clock.ts";
import { ApiError } from "../http/errors.ts";
import { isId } from "../ids.ts";
import { dailyQuotaToday, sentOnDayBySender } from "../senders/quota.ts";
import { findSender, listTenantSenders } from "../senders/repository.ts";
import { trySyncSenderTemplates } from "../senders/service.ts";
import { listTenantTemplates, type TemplateRow } from "../templates/repository.ts";
import { findTenant } from "../tenants/repository.ts";
import { PANEL_PREFIX } from "./paths.ts";
import {
  type ChannelQuota,
  SENDERS_PATH,
  type SenderView,
  type SyncNotice,
  sendersPage,
} from "./senders-view.ts";
import { htmlResponse, type PanelContext, redirect, signedIn } from "./web.ts";

/** Senders (connected numbers), their templates, and today's quota use; "Sync now" per sender. */
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

  async function page(ctx: PanelContext, notice?: SyncNotice, status = 200): Promise<Response> {
    const { session, csrf } = ctx;
    const tenantId = session.tenantId;
    const now = deps.clock.now();
    const day = utcDay(now);
    const [senders, templates, sentToday, tenant] = await Promise.all([
      listTenantSenders(deps.db, tenantId),
      templatesBySender(tenantId),
      sentOnDayBySender(deps.db, tenantId, day),
      findTenant(deps.db, tenantId),
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
    const retentionDays = tenant?.messageRetentionDays ?? 400;
    return htmlResponse(
      sendersPage({ session, csrf, now, senders: views, quotas: [quota], retentionDays, notice }),
      { status },
    );
  }

  return new Elysia({ prefix: PANEL_PREFIX })
    .get(
      "/senders",
      signedIn(deps, (ctx) => {
        const synced = ctx.query.synced;
        return page(ctx, synced && isId(synced, "snd") ? { senderId: synced, ok: true } : undefined);
      }),
    )
    .post(
      "/senders/:senderId/sync-templates",
      signedIn(deps, async (ctx) => {
        const senderId = ctx.params.senderId ?? "";
        // Another tenant's sender is as absent as an unknown one.
        const sender = isId(senderId, "snd")
          ? await findSender(deps.db, ctx.session.tenantId, senderId)
          : undefined;
        if (!sender) throw new ApiError("resource_missing", "No such page.");
        if (!sender.active) {
          return page(
            ctx,
            { senderId, ok: false, reason: "This sender is deactivated: its templates are not synced." },
            409,
          );
        }
        // One provider call per click; the panel's per-IP limit paces repeated clicks.
        const sync = await trySyncSenderTemplates(deps, sender);
        if (!sync.ok) return page(ctx, { senderId, ok: false, reason: sync.reason }, 502);
        // After a post, a page of its own: a reload does not sync again.
        return redirect(
          `${SENDERS_PATH}?synced=${encodeURIComponent(senderId)}#sender-${senderId}`,
          ctx.htmx,
        );
      }),
    );
}
