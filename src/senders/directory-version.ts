import { randomBase62 } from "../ids.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";

/**
 * A version lives a day unless changed again: keys of tenants that stopped sending go away, and an
 * expired one is re-created by the next admission like one Redis lost (every cache reloads once).
 */
export const DIRECTORY_VERSION_TTL_SECONDS = 86_400;

/** What announcing a change needs; AppDeps, the worker runtime and the CLI context have both. */
export interface DirectoryVersionDeps {
  redis: RedisClient;
  keys: RedisKeys;
}

/**
 * Tells every api process that a tenant's senders or templates changed, after the change has
 * committed: the tenant's directory version gets a new value, which the next send admission reads
 * (scripts/send_admission.lua), so no cache loaded before the change is used again. A new random
 * value rather than INCR: a counter recreated after Redis lost it could repeat a value a cache holds.
 *
 * Returns false when Redis could not be told; caches then catch up within DIRECTORY_CACHE_MS.
 */
export async function announceDirectoryChange(
  deps: DirectoryVersionDeps,
  tenantId: string,
): Promise<boolean> {
  try {
    await deps.redis.set(
      deps.keys.directoryVersion(tenantId),
      `r${randomBase62(16)}`,
      "EX",
      DIRECTORY_VERSION_TTL_SECONDS,
    );
    return true;
  } catch {
    return false;
  }
}
