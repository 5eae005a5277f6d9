/**
 * A small read-through cache: values live `ttlMs`, concurrent misses share one load, a failed
 * load is forgotten at once. For hot lookups whose source of truth changes rarely (a tenant's
 * senders, approved templates) where a few seconds of staleness are acceptable.
 */
export function ttlCache<V>(ttlMs: number, load: (key: string) => Promise<V>, maxEntries = 10_000) {
  const entries = new Map<string, { value: Promise<V>; until: number }>();
  return {
    get(key: string): Promise<V> {
      const now = Date.now();
      const hit = entries.get(key);
      if (hit && hit.until > now) return hit.value;
      if (entries.size >= maxEntries) entries.clear();
      const value = load(key);
      entries.set(key, { value, until: now + ttlMs });
      value.catch(() => entries.delete(key));
      return value;
    },
  };
}
