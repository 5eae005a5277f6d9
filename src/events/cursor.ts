import type { Config } from "../config.ts";
import { CURSOR_KINDS, createFeedCursorCodec, type FeedCursorCodec } from "../feed/cursor.ts";

/** The event cursor's prefix: the feed's codec, bound to its own prefix (src/feed/cursor.ts). */
export const EVENT_CURSOR_PREFIX = CURSOR_KINDS.event.prefix;

/** `evc_` cursors: GET /events' `next_cursor`, an endpoint's `delivery.cursor`, a replay's `since`. */
export function createEventCursorCodec(
  config: Pick<Config, "jwtSecret" | "previousSecrets">,
): FeedCursorCodec {
  return createFeedCursorCodec(config.jwtSecret, config.previousSecrets, CURSOR_KINDS.event);
}
