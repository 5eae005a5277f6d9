import { type Insertable, type Selectable, sql } from "kysely";
import { DAY_MS } from "../clock.ts";
import type { Expiry } from "../db/batched-delete.ts";
import type { Db } from "../db/connect.ts";
import type { MediaTable } from "../db/schema.ts";
import { findTenantRow } from "../db/tenant-row.ts";

export type MediaRow = Selectable<MediaTable>;

export async function insertMedia(db: Db, media: Insertable<MediaTable>): Promise<MediaRow> {
  return db.insertInto("media").values(media).returningAll().executeTakeFirstOrThrow();
}

export function findMedia(db: Db, tenantId: string, mediaId: string): Promise<MediaRow | undefined> {
  return findTenantRow(db, "media", tenantId, mediaId);
}

/**
 * An expired handle answers 400 media_expired for this long after its expiry (a caller learns why),
 * then its row goes and the handle answers 404 like any unknown one.
 */
export const MEDIA_EXPIRY: Expiry = {
  keptMs: 90 * DAY_MS,
  batch: 1_000,
  statement: (cutoff, batch) => sql`
    DELETE FROM media WHERE id = ANY(ARRAY(SELECT id FROM media WHERE expires_at < ${cutoff} LIMIT ${batch}))`,
};
