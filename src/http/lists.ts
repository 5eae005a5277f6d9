/** SPEC §2 list envelope. `url` is the path as requested (no query string). */
export function listEnvelope<T>(url: string, data: T[], hasMore = false) {
  return { object: "list" as const, url, has_more: hasMore, data };
}
