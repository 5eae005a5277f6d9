import type { Insertable, Selectable } from "kysely";
import type { TemplateComponent } from "../channel/provider.ts";
import type { Db } from "../db/connect.ts";
import type { TemplatesTable } from "../db/schema.ts";

export type TemplateRow = Selectable<TemplatesTable>;

/** Only APPROVED templates are listed or sendable (SPEC §2); the rest are kept for operators. */
export const APPROVED = "APPROVED";
/** Given by the sync to templates the provider no longer reports; their ids are never reused. */
export const DELETED = "DELETED";

/** The stored components, typed as the provider gave them. */
export function storedComponents(template: TemplateRow): TemplateComponent[] {
  return template.components as TemplateComponent[];
}

/** A sender's templates, tenant-scoped: the query the lists below narrow. */
function senderTemplates(db: Db, tenantId: string, senderId: string) {
  return db
    .selectFrom("templates")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("sender_id", "=", senderId);
}

/** What GET /senders/{sender_id}/templates lists. */
export async function listApprovedTemplates(
  db: Db,
  tenantId: string,
  senderId: string,
): Promise<TemplateRow[]> {
  return senderTemplates(db, tenantId, senderId)
    .where("status", "=", APPROVED)
    .orderBy("name")
    .orderBy("language")
    .execute();
}

/**
 * Every approved language of one template name, by language. The send path picks from these: the
 * requested language, or when none is requested the only one (several -> the caller asks for one).
 */
export async function findApprovedTemplates(
  db: Db,
  tenantId: string,
  senderId: string,
  name: string,
): Promise<TemplateRow[]> {
  return senderTemplates(db, tenantId, senderId)
    .where("name", "=", name)
    .where("status", "=", APPROVED)
    .orderBy("language")
    .execute();
}

/** Every template of a sender whatever its status (operator views). */
export async function listSenderTemplates(
  db: Db,
  tenantId: string,
  senderId: string,
): Promise<TemplateRow[]> {
  return senderTemplates(db, tenantId, senderId).orderBy("name").orderBy("language").execute();
}

/** Every template of the tenant's senders but the DELETED ones (gone at the provider), by sender and name. */
export async function listTenantTemplates(db: Db, tenantId: string): Promise<TemplateRow[]> {
  return db
    .selectFrom("templates")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("status", "!=", DELETED)
    .orderBy("sender_id")
    .orderBy("name")
    .orderBy("language")
    .execute();
}

export async function countApprovedTemplates(db: Db, tenantId: string, senderId: string): Promise<number> {
  const row = await db
    .selectFrom("templates")
    .select((eb) => eb.fn.countAll<number>().as("count"))
    .where("tenant_id", "=", tenantId)
    .where("sender_id", "=", senderId)
    .where("status", "=", APPROVED)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/**
 * Inserts or refreshes templates by (sender_id, name, language). An existing row keeps its `tpl_` id:
 * the id given here is used only when the row is new. The rows must not repeat a (name, language).
 */
export async function upsertTemplates(
  db: Db,
  templates: Insertable<TemplatesTable>[],
): Promise<TemplateRow[]> {
  if (templates.length === 0) return [];
  return db
    .insertInto("templates")
    .values(templates)
    .onConflict((conflict) =>
      conflict.columns(["sender_id", "name", "language"]).doUpdateSet((eb) => ({
        provider_template_id: eb.ref("excluded.provider_template_id"),
        category: eb.ref("excluded.category"),
        status: eb.ref("excluded.status"),
        components: eb.ref("excluded.components"),
        variables: eb.ref("excluded.variables"),
        preview: eb.ref("excluded.preview"),
        header_format: eb.ref("excluded.header_format"),
        rejected_reason: eb.ref("excluded.rejected_reason"),
        updated_at: eb.ref("excluded.updated_at"),
      })),
    )
    .returningAll()
    .execute();
}

/** Marks DELETED every template of the sender not in `keepIds` (and not already DELETED). */
export async function markOtherTemplatesDeleted(
  db: Db,
  tenantId: string,
  senderId: string,
  keepIds: string[],
  now: Date,
): Promise<number> {
  let query = db
    .updateTable("templates")
    .set({ status: DELETED, updated_at: now })
    .where("tenant_id", "=", tenantId)
    .where("sender_id", "=", senderId)
    .where("status", "!=", DELETED);
  if (keepIds.length > 0) query = query.where("id", "not in", keepIds);
  const result = await query.executeTakeFirst();
  return Number(result.numUpdatedRows);
}
