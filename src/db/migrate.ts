import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { sql } from "kysely";
import type { Db } from "./connect.ts";
import { ADVISORY_LOCKS } from "./locks.ts";

const SQL_DIR = join(import.meta.dir, "../../sql");
// Any constant shared by every process of this service: serializes concurrent migrators.
const MIGRATION_LOCK_KEY = ADVISORY_LOCKS.migrations;

/**
 * Applies the files of sql/ in name order, each once, each in its own transaction. A session
 * advisory lock held on one connection makes two processes starting at once take turns.
 */
export async function migrate(db: Db): Promise<string[]> {
  const files = (await readdir(SQL_DIR)).filter((name) => name.endsWith(".sql")).sort();
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
        const text = await Bun.file(join(SQL_DIR, file)).text();
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
