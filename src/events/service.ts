import type { Db } from "../db/connect.ts";
import type { EventType } from "../db/schema.ts";
import type { FeedCursorCodec } from "../feed/cursor.ts";
import { currentFeedEpoch } from "../feed/repository.ts";
import { ApiError } from "../http/errors.ts";
import { type EventRow, readEventEntries } from "./repository.ts";
import { EVENT_TYPES } from "./schemas.ts";

export interface EventPage {
  rows: EventRow[];
  hasMore: boolean;
  nextCursor: string;
}

/**
 * GET /events, with the feed's rules (DESIGN §6): at least once, `next_cursor` on every page (where
 * the page started when it is empty), and the feed's epoch: a cursor of an older one restarts at 0.
 */
export async function readEvents(
  read: <T>(work: (db: Db) => Promise<T>) => Promise<T>,
  cursors: FeedCursorCodec,
  tenantId: string,
  query: { since?: string; limit: number; types?: string },
): Promise<EventPage> {
  const position = query.since === undefined ? undefined : cursors.decode(tenantId, query.since);
  if (query.since !== undefined && !position) {
    throw new ApiError(
      "parameter_invalid",
      "since is not an event cursor this service gave you; pass a next_cursor.",
      {
        param: "since",
      },
    );
  }
  const types = parseTypes(query.types);
  const { epoch, after, fetched } = await read(async (db) => {
    const epoch = await currentFeedEpoch(db);
    const after = position?.epoch === epoch ? position.seq : 0;
    return { epoch, after, fetched: await readEventEntries(db, tenantId, after, query.limit + 1, types) };
  });
  const rows = fetched.slice(0, query.limit);
  const last = rows.at(-1);
  return {
    rows,
    hasMore: fetched.length > query.limit,
    nextCursor: cursors.encode(tenantId, { epoch, seq: last ? last.event_seq : after }),
  };
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
