import type { EventEmitter } from "node:events";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import { type Logger, outageLog } from "../logger.ts";
import { withArrayLiterals } from "./array-literal.ts";
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
  /** How long one query may take before the client gives up (30 s; bulk jobs such as bench fills set more). */
  queryTimeoutMs?: number;
  /**
   * The process's logger: a connection lost is written there once an outage, and its return once
   * (src/logger.ts, outageLog). Without one, failures surface only on the queries that fail.
   */
  logger?: Logger;
}

export function createPool(databaseUrl: string, options: DbOptions = {}): pg.Pool {
  const doomed = new WeakSet<pg.PoolClient>();
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMillis ?? 3000,
    idleTimeoutMillis: 30_000,
    application_name: options.applicationName ?? "messaging",
    // A dead server must not hang a request forever; keepalive finds a silently dropped socket.
    query_timeout: options.queryTimeoutMs ?? 30_000,
    keepAlive: true,
  });
  // A client errors when its server goes away (57P01 on a restart, a reset socket). The pool listens
  // on idle clients only; a checked-out one (between a transaction's queries, say) would emit an
  // unhandled 'error' and kill the process. The failure reaches the caller through its query, and the
  // pool discards the broken client on release (it is no longer queryable), so the next query gets
  // a fresh connection.
  const outages = options.logger && outageLog(options.logger);
  const lost = (error: unknown) => outages?.down("postgres", pool, error);
  pool.on("connect", (client) => {
    outages?.up("postgres", pool);
    tuneQueries(client);
    client.on("error", lost);
    // A FATAL error answers the query in flight and the server closes the connection right after:
    // released before the close arrives, the client would go back to the pool for the next query.
    (client as unknown as { connection: EventEmitter }).connection.on(
      "errorMessage",
      (message: { severity?: string }) => {
        if (message.severity === "FATAL" || message.severity === "PANIC") doomed.add(client);
      },
    );
  });
  pool.on("release", (error, client) => {
    if (!error && doomed.has(client)) void client.end().catch(() => {}); // ending: the pool drops it
  });
  pool.on("error", lost);
  return pool;
}

/** Texts (with parameters) seen this often are prepared: named, parsed and planned once per connection. */
const PREPARE_AFTER = 3;
/** At most this many prepared texts per process: texts that vary (IN lists) never fill a connection. */
const MAX_PREPARED = 400;
const seenTimes = new Map<string, number>();
const preparedNames = new Map<string, string>();
/** Texts whose result columns changed under a prepared statement (DDL): never named again. */
const unpreparable = new Set<string>();
let lastName = 0;

/**
 * Kysely sends every query as an unnamed statement, so Postgres parses, analyzes and plans the text
 * of each execution again: for the hot statements (the webhook store, the send claim, the accept
 * batch) that was much of their cost. A text repeated PREPARE_AFTER times gets a name, and pg then
 * sends its Parse once per connection and only Bind/Execute after (the protocol's prepared
 * statements; Postgres keeps a plan per statement and replans after DDL).
 */
function preparedNameOf(text: string): string | undefined {
  let name = preparedNames.get(text);
  if (name !== undefined || preparedNames.size >= MAX_PREPARED || unpreparable.has(text)) return name;
  const seen = (seenTimes.get(text) ?? 0) + 1;
  if (seen >= PREPARE_AFTER) {
    name = `k${++lastName}`;
    preparedNames.set(text, name);
    seenTimes.delete(text);
  } else {
    if (seenTimes.size >= 10 * MAX_PREPARED) seenTimes.clear();
    seenTimes.set(text, seen);
  }
  return name;
}

/**
 * Every query with parameters, as Kysely sends it (text, values), on each of the pool's connections:
 * - its array parameters go as one literal each (src/db/array-literal.ts): the driver escapes an
 *   array element by element in JavaScript, which for the batch statements (27 columns of the
 *   accept batch, the status and send statements) cost the api more than the rest of building them;
 * - a repeated text goes as a prepared statement (preparedNameOf).
 * Statements without parameters (BEGIN, COMMIT, migrations) go as they are, unnamed.
 */
function tuneQueries(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const [text, params] = args;
    if (typeof text !== "string" || !Array.isArray(params) || params.length === 0 || args.length > 2)
      return query(...args);
    const values = withArrayLiterals(params);
    const name = preparedNameOf(text);
    if (name === undefined) return query(text, values);
    return (query({ name, text, values }) as Promise<unknown>).catch(
      (error: { code?: string; message?: string }) => {
        // A migration changed the columns a `SELECT *` returns: Postgres refuses the prepared
        // statement from now on (0A000). This query fails once; the text runs unnamed after.
        if (error.code === "0A000" && /cached plan must not change result type/.test(error.message ?? "")) {
          unpreparable.add(text);
          preparedNames.delete(text);
        }
        throw error;
      },
    );
  };
}

export function createDb(databaseUrl: string, options: DbOptions = {}): Db {
  return new Kysely<Database>({ dialect: new PostgresDialect({ pool: createPool(databaseUrl, options) }) });
}

/**
 * Creates the database named in the URL when it does not exist yet (safe if two processes race);
 * `template`: as a copy of that database (the tests' migrated template, scripts/test-template.ts).
 */
export async function ensureDatabase(
  databaseUrl: string,
  options: { template?: string } = {},
): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  if (!name) throw new Error("DATABASE_URL names no database");
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  client.on("error", () => {}); // surfaces on the query in flight; see createPool
  await client.connect();
  try {
    const found = await client.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
    if (found.rowCount === 0) {
      try {
        const template = options.template ? ` TEMPLATE ${quoteIdentifier(options.template)}` : "";
        await client.query(`CREATE DATABASE ${quoteIdentifier(name)}${template}`);
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
  client.on("error", () => {});
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
