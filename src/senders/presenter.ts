import type { DailyQuota } from "./quota.ts";
import type { SenderRow } from "./repository.ts";

/**
 * SPEC §2 Sender, plus its channel's daily quota as the panel shows it, and its backpressure
 * (DESIGN §13): its pace, its backlog, and how long the backlog takes to drain at that pace.
 */
export function presentSender(sender: SenderRow, quota: DailyQuota, backlog: number) {
  return {
    object: "sender" as const,
    id: sender.id,
    channel: sender.channel,
    name: sender.name,
    phone_number: sender.phone_number,
    quota: { limit: quota.limit, used: quota.used, resets_at: quota.resetsAt.toISOString() },
    throughput: {
      mps: sender.mps,
      backlog,
      estimated_drain_seconds: sender.mps > 0 ? Math.ceil(backlog / sender.mps) : 0,
    },
  };
}

/**
 * The operator's view (CLI): provider ids and state too. `templates_synced` is the number of
 * approved templates, or null when the templates were never synced.
 */
export function presentSenderForOperator(sender: SenderRow, approvedTemplates: number | null) {
  return {
    object: "sender" as const,
    id: sender.id,
    tenant: sender.tenant_id,
    phone_number: sender.phone_number,
    name: sender.name,
    provider_phone_number_id: sender.provider_phone_number_id,
    active: sender.active,
    mps: sender.mps,
    templates_synced: approvedTemplates,
  };
}
