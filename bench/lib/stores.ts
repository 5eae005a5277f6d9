/**
 * The local PostgreSQL and Redis the benches run against (`BENCH_PG_BASE`, `BENCH_REDIS_URL`), and
 * a bench's own database and Redis prefix in them: made fresh before a run, removed after it.
 */
import { dropDatabase, ensureDatabase } from "../../src/db/connect.ts";
import { deleteInstanceKeys } from "../../src/queues/instance-keys.ts";

export const PG_BASE = process.env.BENCH_PG_BASE ?? "postgres://postgres@127.0.0.1:5432";
export const REDIS_URL = process.env.BENCH_REDIS_URL ?? "redis://127.0.0.1:6379/0";

/** Drops and recreates the database, and deletes the Redis keys of the prefix. */
export async function freshStores(databaseUrl: string, redisPrefix: string): Promise<void> {
  await dropDatabase(databaseUrl);
  await ensureDatabase(databaseUrl);
  await deleteInstanceKeys(REDIS_URL, redisPrefix);
}

/** Deletes the Redis keys of the prefix and drops the database; `onError` hears what failed. */
export async function removeStores(
  databaseUrl: string,
  redisPrefix: string,
  onError: (what: string, error: unknown) => void = () => {},
): Promise<void> {
  await deleteInstanceKeys(REDIS_URL, redisPrefix).catch((e) => onError("redis", e));
  await dropDatabase(databaseUrl).catch((e) => onError("database", e));
}
