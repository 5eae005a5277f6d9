/**
 * How long one migration takes on the database of a service that has run a while, and what it
 * locks: a database migrated up to the migration, grown like `bench/send.ts --grown N` (N million
 * messages, a contact per ten), then the migration applied in one transaction as the service applies
 * it. Prints its duration and every lock it held at its end (relation, mode), so a reader sees
 * whether it blocks the messages table.
 *
 *   bun bench/migration.ts --migration 032_contact_identity.sql --grown 10
 *   bun bench/migration.ts --migration 032_contact_identity.sql --grown 10 --keep   # keep the database
 */
import { sql } from "kysely";
import { createDb, dropDatabase, ensureDatabase } from "../src/db/connect.ts";
import { migrate, migrationFiles, migrationText } from "../src/db/migrate.ts";
import { growDatabase } from "./lib/grow.ts";
import { exitOnHelp } from "./lib/usage.ts";

const USAGE = `
bun bench/migration.ts --migration FILE [--grown N] [--keep]
  --migration FILE  a file of sql/ (e.g. 032_contact_identity.sql): every earlier one is applied first
  --grown N         millions of messages grown before it (10)
  --keep            keep the database (bench_migration) afterwards
`;
exitOnHelp(USAGE);

function flag(name: string): string | undefined {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 ? process.argv[at + 1] : undefined;
}
const migration = flag("migration");
const grown = Number(flag("grown") ?? 10);
const keep = process.argv.includes("--keep");
if (!migration || !(await migrationFiles()).includes(migration)) {
  console.error(`--migration must name a file of sql/\n${USAGE}`);
  process.exit(2);
}
if (!Number.isFinite(grown) || grown < 0) {
  console.error(`--grown must be a number of millions\n${USAGE}`);
  process.exit(2);
}

const say = (message: string) => console.log(`[migration] ${message}`);
const url = `${process.env.TEST_DATABASE_BASE ?? "postgres://postgres@127.0.0.1:5432"}/bench_migration`;
await dropDatabase(url).catch(() => undefined);
await ensureDatabase(url);
// Statements over millions of rows: no 30 s query timeout.
const db = createDb(url, { max: 1, applicationName: "bench-migration", queryTimeoutMs: 3_600_000 });
try {
  await migrate(db, { before: migration });
  await growDatabase(db, grown, say);
  const text = await migrationText(migration);
  const started = performance.now();
  const locks = await db.transaction().execute(async (trx) => {
    await sql.raw(text).execute(trx);
    const held = await sql<{ relation: string | null; mode: string }>`
      SELECT l.relation::regclass::text AS relation, l.mode
      FROM pg_locks l
      WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation'
      ORDER BY 1, 2`.execute(trx);
    await trx.insertInto("schema_migrations").values({ name: migration }).execute();
    return held.rows;
  });
  const seconds = (performance.now() - started) / 1000;
  say(`${migration} on ${grown} million messages: ${seconds.toFixed(2)} s`);
  const tables = locks.filter((lock) => lock.relation && !lock.relation.startsWith("pg_"));
  for (const lock of tables) say(`  held ${lock.mode} on ${lock.relation}`);
  say(`messages locked: ${tables.some((lock) => lock.relation === "messages") ? "yes" : "no"}`);
} finally {
  await db.destroy();
  if (!keep) await dropDatabase(url);
}
