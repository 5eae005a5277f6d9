import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import type { Database } from "./schema.ts";

export type Db = Kysely<Database>;

// int8 (bigint) and numeric arrive as strings by default; our bigints (feed positions, counts)
// stay far below 2^53, so numbers are the honest type.
pg.types.setTypeParser(20, (value) => Number(value));

export interface DbOptions {
  max?: number;
  /** How long a query may wait for a connection before failing (so an outage answers, not hangs). */
  connectionTimeoutMillis?: number;
  applicationName?: string;
}

export function createPool(databaseUrl: string, options: DbOptions = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? 3000,
    idleTimeoutMillis: 30_000,
    application_name: options.applicationName ?? "messaging",
    // A dead server must not hang a request forever.
    query_timeout: 30_000,
  });
  // Idle clients can error when the server goes away; without a listener that kills the process.
  pool.on("error", () => {});
  return pool;
}

export function createDb(databaseUrl: string, options: DbOptions = {}): Db {
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool: createPool(databaseUrl, options) }) });
}

/** Creates the database named in the URL when it does not exist yet (safe if two processes race). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  if (!name) throw new Error("DATABASE_URL names no database");
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (found.rowCount === 0) {
      try {
        await client.query(`CREATE DATABASE ${quoteIdentifier(name)}`);
      } catch (error) {
        // 42P04 duplicate_database, 23505 unique_violation: another process won the race.
        const code = (error as { code?: string }).code;
        if (code !== "42P04" && code !== "23505") throw error;
      }
    }
  } finally {
    await client.end();
  }
}

/** Drops a database (tests); terminates its sessions first. */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

export function quoteIdentifier(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
