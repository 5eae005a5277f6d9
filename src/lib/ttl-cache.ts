/**
 * A small read-through cache: values live `ttlMs`, concurrent misses share one load, a failed
 * load is forgotten at once. For hot lookups whose source of truth changes rarely (a tenant's
 * senders, approved templates). A caller that knows the current version of the source (the send
 * admission reads a tenant's directory version) passes it: an entry loaded at another version is
 * not reused, so a change is seen at once; without one, a few seconds of staleness are accepted.
 */
export function ttlCache<V>(ttlMs: number, load: (key: string) => Promise<V>, maxEntries = 10_000) {
  const entries = new Map<string, { value: Promise<V>; until: number; version: string | undefined }>();
  return {
    get(key: string, version?: string): Promise<V> {
      const now = Date.now();
      const hit = entries.get(key);
      if (hit && hit.until > now && (version === undefined || hit.version === version)) return hit.value;
      if (entries.size >= maxEntries) entries.clear();
      // Loaded after the version was read, so the value is at least as new as that version.
      const value = load(key);
      const entry = { value, until: now + ttlMs, version };
      entries.set(key, entry);
      value.catch(() => {
        if (entries.get(key) === entry) entries.delete(key);
      });
      return value;
    },
  };
}
