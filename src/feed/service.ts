import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import type { FeedCursorCodec } from "./cursor.ts";
import { currentFeedEpoch, type FeedRow, readFeedEntries } from "./repository.ts";

export interface FeedPage {
  rows: FeedRow[];
  hasMore: boolean;
  nextCursor: string;
}

/**
 * GET /messages. The page and the epoch are read together; a cursor of another epoch (rare: an
 * operator bumped it) is read again from position 0. `next_cursor` is the last position on the page,
 * or where the page started when it is empty, so it is never behind what the client has seen.
 */
export async function readFeed(
  db: Db,
  cursors: FeedCursorCodec,
  tenantId: string,
  since: string | undefined,
  limit: number,
): Promise<FeedPage> {
  const position = since === undefined ? undefined : cursors.decode(tenantId, since);
  if (since !== undefined && !position) {
    throw new ApiError(
      "parameter_invalid",
      "since is not a cursor this service gave you; pass a next_cursor.",
      {
        param: "since",
      },
    );
  }
  const [epoch, optimistic] = await Promise.all([
    currentFeedEpoch(db),
    readFeedEntries(db, tenantId, position?.seq ?? 0, limit + 1),
  ]);
  const after = position?.epoch === epoch ? position.seq : 0;
  const fetched =
    after === (position?.seq ?? 0) ? optimistic : await readFeedEntries(db, tenantId, after, limit + 1);
  const rows = fetched.slice(0, limit);
  const last = rows.at(-1);
  return {
    rows,
    hasMore: fetched.length > limit,
    nextCursor: cursors.encode(tenantId, { epoch, seq: last ? last.seq : after }),
  };
}
