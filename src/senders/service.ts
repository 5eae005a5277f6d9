import { ProviderError } from "../channel/provider.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { countApprovedTemplates, listApprovedTemplates, type TemplateRow } from "../templates/repository.ts";
import { announceDirectoryChange, type DirectoryVersionDeps } from "./directory-version.ts";
import { findSender, insertSender, type NewSender, type SenderRow, setSenderActive } from "./repository.ts";

import { syncSenderTemplates, type TemplateSyncDeps } from "./template-sync.ts";

/** GET /senders/{sender_id}/templates: unknown or another tenant's sender -> 404 (ids are case-sensitive). */
export async function listTemplatesOfSender(
  db: Db,
  tenantId: string,
  senderId: string,
): Promise<TemplateRow[]> {
  const sender = await findSender(db, tenantId, senderId);
  if (!sender) {
    throw new ApiError("resource_missing", `No such sender: ${senderId}.`, { param: "sender_id" });
  }
  return listApprovedTemplates(db, tenantId, sender.id);
}

export type TemplateSyncAttempt = { ok: true; templates: TemplateRow[] } | { ok: false; reason: string };

/**
 * Syncs now when the provider answers; a provider failure is reported, not thrown, because the
 * maintenance worker's loop syncs every active sender again later. Other failures (Postgres) throw.
 */
export async function trySyncSenderTemplates(
  deps: TemplateSyncDeps,
  sender: SenderRow,
): Promise<TemplateSyncAttempt> {
  try {
    return { ok: true, templates: await syncSenderTemplates(deps, sender) };
  } catch (error) {
    if (error instanceof ProviderError) return { ok: false, reason: error.message };
    throw error;
  }
}

/** Creates a sender and tries to sync its templates; the sender exists whatever the provider says. */
export async function registerSender(
  deps: TemplateSyncDeps & DirectoryVersionDeps,
  input: NewSender,
): Promise<{ sender: SenderRow; sync: TemplateSyncAttempt }> {
  const created = await insertSender(deps.db, deps.config.providerTokenKey, input);
  // The automatic sender choice counts it from the next send on.
  await announceDirectoryChange(deps, created.tenant_id);
  const sync = await trySyncSenderTemplates(deps, created);
  // Re-read: the sync stamped templates_synced_at.
  const sender = (await findSender(deps.db, created.tenant_id, created.id)) ?? created;
  return { sender, sync };
}

/**
 * Activates or deactivates a sender (the CLI's `sender deactivate`), and announces the change so the
 * very next send of any api process sees it. `announced` is false when Redis could not be told.
 */
export async function setSenderActivity(
  deps: { db: Db } & DirectoryVersionDeps,
  senderId: string,
  active: boolean,
): Promise<{ sender: SenderRow; announced: boolean } | undefined> {
  const sender = await setSenderActive(deps.db, senderId, active);
  if (!sender) return undefined;
  return { sender, announced: await announceDirectoryChange(deps, sender.tenant_id) };
}

/** Approved templates of a synced sender; null when its templates were never synced. */
export async function approvedTemplateCount(db: Db, sender: SenderRow): Promise<number | null> {
  return sender.templates_synced_at === null ? null : countApprovedTemplates(db, sender.tenant_id, sender.id);
}
