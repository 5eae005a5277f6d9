/**
 * The database every test file's own database is copied from (CREATE DATABASE … TEMPLATE: a file
 * copy, about a quarter of the time of applying every migration, for each of the suite's files).
 * Named by a hash of sql/, so a changed migration makes a new one; made under another name and
 * renamed when complete, so two runs racing never copy a half-migrated template. Templates of other
 * migrations are dropped (one in use is left for next time).
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { createDb, dropDatabase, ensureDatabase, quoteIdentifier } from "../src/db/connect.ts";
import { migrate, migrationFiles, migrationText } from "../src/db/migrate.ts";

const PREFIX = "test_template_";

export async function prepareTemplateDatabase(base: string): Promise<string> {
  const hash = createHash("sha256");
  for (const file of await migrationFiles()) hash.update(file).update(await migrationText(file));
  const name = `${PREFIX}${hash.digest("hex").slice(0, 16)}`;
  const admin = new pg.Client({ connectionString: `${base}/postgres` });
  admin.on("error", () => {});
  await admin.connect();
  try {
    const found = await admin.query<{ datname: string }>(
      "SELECT datname FROM pg_database WHERE datname LIKE 'test\\_template\\_%'",
    );
    for (const { datname } of found.rows) {
      // Another run's template still being built (a pid after the hash) is not ours to drop.
      if (datname === name || !/^test_template_[0-9a-f]{16}$/.test(datname)) continue;
      await admin.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(datname)}`).catch(() => undefined);
    }
    if (found.rows.some((row) => row.datname === name)) return name;
    const building = `${name}_${process.pid}`;
    await ensureDatabase(`${base}/${building}`);
    const db = createDb(`${base}/${building}`, { max: 1 });
    try {
      await migrate(db);
    } finally {
      await db.destroy();
    }
    try {
      await admin.query(`ALTER DATABASE ${quoteIdentifier(building)} RENAME TO ${quoteIdentifier(name)}`);
    } catch {
      // Another run made it meanwhile: use theirs.
      await dropDatabase(`${base}/${building}`);
    }
    return name;
  } finally {
    await admin.end();
  }
}
