/** SPEC §2 list envelope. `url` is the path as requested (no query string). */
export function listEnvelope<T>(url: string, data: T[], hasMore = false) {
  return { object: "list" as const, url, has_more: hasMore, data };
}

/** A page read from a cursor (the feed, the event log): the list, and `next_cursor` to pass as `since` next. */
export function cursorList<R, T>(
  url: string,
  page: { rows: R[]; hasMore: boolean; nextCursor: string },
  present: (row: R) => T,
) {
  return { ...listEnvelope(url, page.rows.map(present), page.hasMore), next_cursor: page.nextCursor };
}
