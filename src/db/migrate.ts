import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { sql } from "kysely";
import type { Db } from "./connect.ts";
import { ADVISORY_LOCKS } from "./locks.ts";

const SQL_DIR = join(import.meta.dir, "../../sql");
// Any constant shared by every process of this service: serializes concurrent migrators.
const MIGRATION_LOCK_KEY = ADVISORY_LOCKS.migrations;

/** The migration files, in the order they apply. */
export async function migrationFiles(): Promise<string[]> {
  return (await readdir(SQL_DIR)).filter((name) => name.endsWith(".sql")).sort();
}

/** One migration's SQL. */
export function migrationText(file: string): Promise<string> {
  return Bun.file(join(SQL_DIR, file)).text();
}

/**
 * Applies the files of sql/ in name order, each once, each in its own transaction. A session
 * advisory lock held on one connection makes two processes starting at once take turns. `before`
 * stops at that file (bench/migration.ts times one migration on a grown database).
 */
export async function migrate(db: Db, options: { before?: string } = {}): Promise<string[]> {
  const all = await migrationFiles();
  const files = options.before === undefined ? all : all.filter((name) => name < (options.before as string));
  return db.connection().execute(async (conn) => {
    await sql`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`.execute(conn);
    try {
      await sql`CREATE TABLE IF NOT EXISTS schema_migrations (
        name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`.execute(conn);
      const done = new Set(
        (await conn.selectFrom("schema_migrations").select("name").execute()).map((r) => r.name),
      );
      const applied: string[] = [];
      for (const file of files) {
        if (done.has(file)) continue;
        const text = await migrationText(file);
        await conn.transaction().execute(async (trx) => {
          await sql.raw(text).execute(trx);
          await trx.insertInto("schema_migrations").values({ name: file }).execute();
        });
        applied.push(file);
      }
      return applied;
    } finally {
      await sql`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`.execute(conn);
    }
  });
}
