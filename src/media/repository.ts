import { type Insertable, type Selectable, sql } from "kysely";
import { deleteInBatches } from "../db/batched-delete.ts";
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

/**
 * An expired handle answers 400 media_expired for this long after its expiry (a caller learns why),
 * then its row goes and the handle answers 404 like any unknown one.
 */
export const EXPIRED_MEDIA_KEPT_MS = 90 * 86_400_000;

/** Maintenance: media rows long past their expiry, a bounded batch per statement. */
export function deleteExpiredMedia(db: Db, now: Date): Promise<number> {
  const cutoff = new Date(now.getTime() - EXPIRED_MEDIA_KEPT_MS);
  return deleteInBatches(
    db,
    1_000,
    (batch) => sql`
      DELETE FROM media WHERE id = ANY(ARRAY(SELECT id FROM media WHERE expires_at < ${cutoff} LIMIT ${batch}))`,
  );
}
