import type { Insertable, Selectable } from "kysely";
import type { Db } from "../db/connect.ts";
import type { MediaTable } from "../db/schema.ts";

export type MediaRow = Selectable<MediaTable>;

export async function insertMedia(db: Db, media: Insertable<MediaTable>): Promise<MediaRow> {
  return db.insertInto("media").values(media).returningAll().executeTakeFirstOrThrow();
}

export async function findMedia(db: Db, tenantId: string, mediaId: string): Promise<MediaRow | undefined> {
  return db
    .selectFrom("media")
    .selectAll()
    .where("tenant_id", "=", tenantId)
    .where("id", "=", mediaId)
    .executeTakeFirst();
}
