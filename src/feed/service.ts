import type { Db } from "../db/connect.ts";
import { cursorRefused, type FeedCursorCodec, type FeedPosition } from "./cursor.ts";
import type { FeedHead } from "./heads.ts";
import { currentFeedEpoch, type FeedRow, readFeedEntries } from "./repository.ts";

export interface CursorPage<Row> {
  rows: Row[];
  hasMore: boolean;
  nextCursor: string;
}

export type FeedPage = CursorPage<FeedRow>;

/**
 * What a read of a log after a position found: up to `fetch` rows in log order. A read that examines
 * rows it does not return (a filter) says how far it looked: every row it would return up to
 * `examinedTo` is among `rows` when they are fewer than `fetch`, so the next page may start after it;
 * `stoppedShort` when it stopped there at its bound rather than at the end of the log.
 */
export interface LogRead<Row> {
  rows: Row[];
  examinedTo?: number;
  stoppedShort?: boolean;
}

/**
 * GET /messages. The page and the epoch are read together; a cursor of another epoch (rare: an
 * operator bumped it) is read again from position 0. `next_cursor` is the last position on the page,
 * or where the page started when it is empty, so it is never behind what the client has seen.
 *
 * A cursor at or past the tenant's head in Redis (`readHead`) is answered without Postgres; the
 * rest is read where `read` runs it (a replica may answer, src/db/read-replica.ts: it lags, so a
 * page may come later, never out of order).
 */
export function readFeed(
  read: <T>(work: (db: Db) => Promise<T>) => Promise<T>,
  cursors: FeedCursorCodec,
  tenantId: string,
  since: string | undefined,
  limit: number,
  readHead?: (tenantId: string) => Promise<FeedHead | undefined>,
): Promise<FeedPage> {
  return readCursorPage(
    { read, cursors, tenantId, since, limit, readHead },
    async (db, afterSeq, fetch) => ({ rows: await readFeedEntries(db, tenantId, afterSeq, fetch) }),
    (row) => row.seq,
  );
}

/**
 * One page of a per-tenant log read from a cursor (the feed, the event log: DESIGN §6's rules). A
 * cursor this service did not give this tenant is a 400, param `since`. `next_cursor` is the last row
 * of a full page; otherwise as far as the read examined (past rows a filter skipped), or where the
 * page started. `has_more` also when a bounded read stopped before the end of the log, even on an
 * empty page: the caller may ask again at once.
 */
export async function readCursorPage<Row>(
  page: {
    read: <T>(work: (db: Db) => Promise<T>) => Promise<T>;
    cursors: FeedCursorCodec;
    tenantId: string;
    since: string | undefined;
    limit: number;
    readHead?: (tenantId: string) => Promise<FeedHead | undefined>;
  },
  fetchAfter: (db: Db, afterSeq: number, fetch: number) => Promise<LogRead<Row>>,
  seqOf: (row: Row) => number,
): Promise<CursorPage<Row>> {
  const { cursors, tenantId, since, limit, readHead } = page;
  const position = since === undefined ? undefined : cursors.decode(tenantId, since);
  if (since !== undefined && !position) {
    throw cursorRefused(cursors.kind, "since", since);
  }
  if (position && readHead) {
    const empty = emptyPageAtHead(cursors, tenantId, position, await readHead(tenantId));
    if (empty) return empty;
  }
  const { epoch, after, fetched } = await page.read(async (db) => {
    const [epoch, optimistic] = await Promise.all([
      currentFeedEpoch(db),
      fetchAfter(db, position?.seq ?? 0, limit + 1),
    ]);
    const after = position?.epoch === epoch ? position.seq : 0;
    const fetched = after === (position?.seq ?? 0) ? optimistic : await fetchAfter(db, after, limit + 1);
    return { epoch, after, fetched };
  });
  const rows = fetched.rows.slice(0, limit);
  const full = fetched.rows.length > limit;
  const last = rows.at(-1);
  // A full page ends at its last row; a short one where the read stopped looking, or where it began.
  const seq = full && last ? seqOf(last) : Math.max(last ? seqOf(last) : after, fetched.examinedTo ?? after);
  return {
    rows,
    hasMore: full || fetched.stoppedShort === true,
    nextCursor: cursors.encode(tenantId, { epoch, seq }),
  };
}

/**
 * The page Postgres would give a cursor at or past the head: empty, `next_cursor` the cursor's own
 * position (re-signed with the current key). Undefined when Postgres must answer: no head (Redis lost
 * it), or another epoch (bumped: the old cursor restarts at 0; or a head not yet synced to the new one).
 * A head behind Postgres only keeps the reader where it is until the sequencer raises it.
 */
export function emptyPageAtHead(
  cursors: FeedCursorCodec,
  tenantId: string,
  position: FeedPosition,
  head: FeedHead | undefined,
): CursorPage<never> | undefined {
  if (!head || position.epoch !== head.epoch || position.seq < head.seq) return undefined;
  return { rows: [], hasMore: false, nextCursor: cursors.encode(tenantId, position) };
}
