import type { Db } from "../db/connect.ts";
import type { EventType } from "../db/schema.ts";
import type { FeedCursorCodec } from "../feed/cursor.ts";
import { type CursorPage, readCursorPage } from "../feed/service.ts";
import { ApiError } from "../http/errors.ts";
import { type EventRow, readEventEntries, readEventsOfTypes } from "./repository.ts";
import { EVENT_TYPES } from "./schemas.ts";

/**
 * GET /events, with the feed's rules (DESIGN §6): at least once, `next_cursor` on every page, and the
 * feed's epoch: a cursor of an older one restarts at 0. Filtered by `types`, a call examines at most
 * EVENT_SCAN_ROWS positions of the log and its `next_cursor` moves past them, page empty or not: a
 * poller of rare types steps through the log instead of reading all of it on every call.
 */
export function readEvents(
  read: <T>(work: (db: Db) => Promise<T>) => Promise<T>,
  cursors: FeedCursorCodec,
  tenantId: string,
  query: { since?: string; limit: number; types?: string },
): Promise<CursorPage<EventRow>> {
  const types = parseTypes(query.types);
  return readCursorPage(
    { read, cursors, tenantId, since: query.since, limit: query.limit },
    async (db, afterSeq, fetch) =>
      types === undefined
        ? { rows: await readEventEntries(db, tenantId, afterSeq, fetch) }
        : readEventsOfTypes(db, tenantId, afterSeq, fetch, types),
    (row) => row.event_seq,
  );
}

function parseTypes(text: string | undefined): EventType[] | undefined {
  if (text === undefined) return undefined;
  const types = text.split(",").map((type) => type.trim());
  const unknown = types.find((type) => !(EVENT_TYPES as readonly string[]).includes(type));
  if (unknown !== undefined || types.length === 0) {
    throw new ApiError(
      "parameter_invalid",
      `types takes a comma-separated list of: ${EVENT_TYPES.join(", ")}.`,
      {
        param: "types",
      },
    );
  }
  return types as EventType[];
}
