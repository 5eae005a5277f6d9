import { sql } from "kysely";
import { CONTACT_IDENTITY_COLUMNS, type ContactIdentityRow } from "../contacts/repository.ts";
import type { Db } from "../db/connect.ts";
import type { HistoryMessageRow } from "../history/presenter.ts";
import { HISTORY_COLUMNS } from "../history/repository.ts";

export interface FeedRow extends HistoryMessageRow, ContactIdentityRow {
  seq: number;
}

/** DESIGN §6 step 3: positions after `afterSeq`, in order, `fetch` of them at most. */
export async function readFeedEntries(
  db: Db,
  tenantId: string,
  afterSeq: number,
  fetch: number,
): Promise<FeedRow[]> {
  return db
    .selectFrom("feed_entries")
    .innerJoin("messages", "messages.id", "feed_entries.message_id")
    .innerJoin("contacts", "contacts.id", "messages.contact_id")
    .select(HISTORY_COLUMNS)
    .select(["feed_entries.seq", ...CONTACT_IDENTITY_COLUMNS])
    .where("feed_entries.tenant_id", "=", tenantId)
    .where("feed_entries.seq", ">", afterSeq)
    .orderBy("feed_entries.seq")
    .limit(fetch)
    .execute();
}

export async function currentFeedEpoch(db: Db): Promise<number> {
  const row = await db.selectFrom("feed_epoch").select("epoch").executeTakeFirstOrThrow();
  return row.epoch;
}

/**
 * After a restore or failover positions may be handed out again; a new epoch sends every older
 * cursor back to the start (duplicates, never loss).
 */
export async function bumpFeedEpoch(db: Db): Promise<number> {
  const row = await db
    .updateTable("feed_epoch")
    .set({ epoch: sql`epoch + 1` })
    .returning("epoch")
    .executeTakeFirstOrThrow();
  return row.epoch;
}
