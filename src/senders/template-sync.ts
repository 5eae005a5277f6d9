import type { Insertable } from "kysely";
import { sql } from "kysely";
import type { ChannelProvider, ProviderTemplate } from "../channel/provider.ts";
import type { Clock } from "../clock.ts";
import type { Config } from "../config.ts";
import type { Db } from "../db/connect.ts";
import { ADVISORY_LOCKS } from "../db/locks.ts";
import type { TemplatesTable } from "../db/schema.ts";
import { newId } from "../ids.ts";
import type { Logger } from "../logger.ts";
import {
  listSenderTemplates,
  markOtherTemplatesDeleted,
  type TemplateRow,
  upsertTemplates,
} from "../templates/repository.ts";
import { bodyText, headerFormat, templateVariables } from "../templates/variables.ts";
import { announceDirectoryChange, type DirectoryVersionDeps } from "./directory-version.ts";
import {
  listAllActiveSenders,
  type SenderRow,
  senderCredentials,
  setTemplatesSyncedAt,
} from "./repository.ts";

export interface TemplateSyncDeps extends Partial<DirectoryVersionDeps> {
  config: Pick<Config, "providerTokenKey">;
  db: Db;
  provider: ChannelProvider;
  clock: Clock;
}

/**
 * Mirrors the provider's templates of one sender into `templates`: every status is stored (only
 * APPROVED is listed), ids stay stable across syncs, templates the provider stopped reporting become
 * DELETED. The provider is asked first, outside the transaction, so no transaction waits on HTTP.
 * Returns every template of the sender after the sync, by name and language. Throws ProviderError
 * when the provider cannot be asked; nothing is changed then. A sync that changed a template
 * announces it (the tenant's directory version) when given Redis; one without it (a bench seeding
 * before any api runs) leaves api caches to DIRECTORY_CACHE_MS.
 */
export async function syncSenderTemplates(deps: TemplateSyncDeps, sender: SenderRow): Promise<TemplateRow[]> {
  const reported = await deps.provider.listTemplates(senderCredentials(deps.config.providerTokenKey, sender));
  const now = deps.clock.now();
  // One row per (name, language): the upsert cannot touch a row twice in one statement.
  const byKey = new Map<string, Insertable<TemplatesTable>>();
  for (const template of reported) {
    byKey.set(JSON.stringify([template.name, template.language]), templateRow(sender, template, now));
  }
  const { before, after } = await deps.db.transaction().execute(async (trx) => {
    const before = await listSenderTemplates(trx, sender.tenant_id, sender.id);
    const upserted = await upsertTemplates(trx, [...byKey.values()]);
    await markOtherTemplatesDeleted(
      trx,
      sender.tenant_id,
      sender.id,
      upserted.map((row) => row.id),
      now,
    );
    await setTemplatesSyncedAt(trx, sender.tenant_id, sender.id, now);
    return { before, after: await listSenderTemplates(trx, sender.tenant_id, sender.id) };
  });
  if (deps.redis && deps.keys && templatesDiffer(before, after)) {
    await announceDirectoryChange({ redis: deps.redis, keys: deps.keys }, sender.tenant_id);
  }
  return after;
}

/** Whether a sync changed anything a send can see; `updated_at` moves on every sync, so it is left out. */
function templatesDiffer(before: TemplateRow[], after: TemplateRow[]): boolean {
  const content = (rows: TemplateRow[]) => JSON.stringify(rows.map(({ updated_at: _, ...row }) => row));
  return content(before) !== content(after);
}

function templateRow(sender: SenderRow, template: ProviderTemplate, now: Date): Insertable<TemplatesTable> {
  return {
    id: newId("tpl"),
    tenant_id: sender.tenant_id,
    sender_id: sender.id,
    provider_template_id: template.providerId,
    name: template.name,
    language: template.language,
    category: template.category,
    status: template.status,
    components: JSON.stringify(template.components),
    variables: JSON.stringify(templateVariables(template.components)),
    preview: bodyText(template.components),
    header_format: headerFormat(template.components),
    rejected_reason: template.status === "REJECTED" ? (template.rejectedReason ?? null) : null,
    updated_at: now,
  };
}

// Any constant shared by every maintenance process: only one of them syncs at a time.
export const TEMPLATE_SYNC_LOCK_KEY = ADVISORY_LOCKS.templateSync;

interface LockAttempt {
  locked: boolean;
}

export type SyncAllOutcome = { ran: false } | { ran: true; synced: number; failed: number };

/**
 * Syncs every active sender of every tenant, unless another process is already doing it (a session
 * advisory lock on one pinned connection; the syncs themselves use the pool). One sender's failure is
 * logged and the others still sync.
 */
export async function syncAllActiveSenders(
  deps: TemplateSyncDeps & { logger: Logger },
): Promise<SyncAllOutcome> {
  return deps.db.connection().execute(async (conn) => {
    const lock =
      await sql<LockAttempt>`SELECT pg_try_advisory_lock(${TEMPLATE_SYNC_LOCK_KEY}) AS locked`.execute(conn);
    if (!lock.rows[0]?.locked) return { ran: false };
    try {
      let synced = 0;
      let failed = 0;
      for (const sender of await listAllActiveSenders(deps.db)) {
        try {
          await syncSenderTemplates(deps, sender);
          synced++;
        } catch (error) {
          failed++;
          deps.logger.warn(
            { sender: sender.id, tenant: sender.tenant_id, err: (error as Error).message },
            "template sync failed for a sender",
          );
        }
      }
      return { ran: true, synced, failed };
    } finally {
      await sql`SELECT pg_advisory_unlock(${TEMPLATE_SYNC_LOCK_KEY})`.execute(conn);
    }
  });
}
