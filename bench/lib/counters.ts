/**
 * Server-side counters over a measured window, per accepted send: Postgres transactions, rows and
 * WAL (pg_stat_database, pg_stat_wal), reads per table and per index (pg_stat_user_tables,
 * pg_stat_user_indexes), Redis commands by name (INFO commandstats), and, on a server that loads
 * pg_stat_statements (bench/stats-postgres.ts), the time each statement of the database took.
 */
import { sql } from "kysely";
import type { Db } from "../../src/db/connect.ts";
import type { RedisClient } from "../../src/redis/connect.ts";
import { fmt } from "./format.ts";

export async function readCounters(db: Db, redis: RedisClient) {
  const database = await sql<{
    xact_commit: number;
    tup_inserted: number;
    tup_updated: number;
    tup_fetched: number;
  }>`SELECT xact_commit::float8 AS xact_commit, tup_inserted::float8 AS tup_inserted,
       tup_updated::float8 AS tup_updated, tup_fetched::float8 AS tup_fetched
     FROM pg_stat_database WHERE datname = current_database()`.execute(db);
  const wal = await sql<{ wal_records: number; wal_bytes: number; wal_fpi: number; wal_sync: number }>`
    SELECT wal_records::float8 AS wal_records, wal_bytes::float8 AS wal_bytes, wal_fpi::float8 AS wal_fpi,
      wal_sync::float8 AS wal_sync FROM pg_stat_wal`
    .execute(db)
    .catch(() => ({ rows: [] }));
  const tables = await sql<{
    relname: string;
    seq_scan: number;
    seq_tup_read: number;
    idx_scan: number;
    idx_tup_fetch: number;
  }>`SELECT relname, seq_scan::float8 AS seq_scan, seq_tup_read::float8 AS seq_tup_read,
       coalesce(idx_scan, 0)::float8 AS idx_scan, coalesce(idx_tup_fetch, 0)::float8 AS idx_tup_fetch
     FROM pg_stat_user_tables`.execute(db);
  const perTable: Record<string, number> = {};
  for (const t of tables.rows) {
    for (const key of ["seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch"] as const) {
      perTable[`${t.relname}.${key}`] = t[key];
    }
  }
  // Index entries read per index: which range a query walks (a plan that drifts to a wider index as
  // the table grows shows here before it shows in latency).
  const indexes = await sql<{ indexrelname: string; idx_tup_read: number }>`
    SELECT indexrelname, idx_tup_read::float8 AS idx_tup_read FROM pg_stat_user_indexes`.execute(db);
  const perIndex = Object.fromEntries(indexes.rows.map((i) => [i.indexrelname, i.idx_tup_read]));
  const statements = await readStatements(db);
  const commands: Record<string, number> = {};
  for (const line of (await redis.info("commandstats")).split("\n")) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match?.[1]) commands[match[1]] = Number(match[2]);
  }
  return {
    postgres: { ...database.rows[0], ...wal.rows[0] } as Record<string, number>,
    tables: perTable,
    indexes: perIndex,
    redis: commands,
    statements: statements.counts,
    statementTexts: statements.texts,
  };
}

/**
 * Execution time, calls and WAL of each statement of this database, by query id (`<id>.ms`,
 * `<id>.calls`, `<id>.wal_bytes`), with the statements' opening words: nothing when the server does
 * not load pg_stat_statements (the shared server does not; bench/stats-postgres.ts starts one that does).
 */
async function readStatements(db: Db) {
  const counts: Record<string, number> = {};
  const texts: Record<string, string> = {};
  const rows = await sql<{ id: string; ms: number; calls: number; wal_bytes: number; text: string }>`
    SELECT queryid::text AS id, total_exec_time::float8 AS ms, calls::float8 AS calls,
      wal_bytes::float8 AS wal_bytes, left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 90) AS text
    FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`
    .execute(db)
    .catch(() => ({ rows: [] }));
  for (const row of rows.rows) {
    counts[`${row.id}.ms`] = row.ms;
    counts[`${row.id}.calls`] = row.calls;
    counts[`${row.id}.wal_bytes`] = row.wal_bytes;
    texts[row.id] = row.text;
  }
  return { counts, texts };
}

export type Counters = Awaited<ReturnType<typeof readCounters>>;

/** Deltas of two readings. Postgres WAL and Redis counters are server-wide: other users count too. */
export function counterDeltas(before: Counters, after: Counters) {
  const delta = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(
      Object.keys(b)
        .map((k) => [k, (b[k] ?? 0) - (a[k] ?? 0)] as const)
        .filter(([, v]) => v !== 0),
    );
  return {
    postgres: delta(before.postgres, after.postgres),
    tables: delta(before.tables, after.tables),
    indexes: delta(before.indexes, after.indexes),
    redis: delta(before.redis, after.redis),
    statements: delta(before.statements, after.statements),
    statementTexts: after.statementTexts,
  };
}

export type CounterDeltas = ReturnType<typeof counterDeltas>;

export function describeCounters(d: CounterDeltas, accepted: number): string {
  const per = (n: number | undefined) => fmt((n ?? 0) / accepted, 2);
  const pg = d.postgres;
  const redisTotal = Object.values(d.redis).reduce((a, b) => a + b, 0);
  const top = Object.entries(d.redis)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([name, n]) => `${name} ${per(n)}`)
    .join(", ");
  return [
    `per accepted send: Postgres ${per(pg.xact_commit)} transactions (each autocommit query is one), ` +
      `${per(pg.tup_inserted)} rows inserted, ${per(pg.tup_updated)} updated, ${per(pg.tup_fetched)} fetched; ` +
      `WAL ${per(pg.wal_records)} records, ${fmt((pg.wal_bytes ?? 0) / accepted)} bytes, ${per(pg.wal_fpi)} full-page images; ` +
      `${per(pg.wal_sync)} WAL fsyncs (${fmt(accepted / (pg.wal_sync || Number.NaN), 1)} sends per fsync)`,
    `per accepted send: Redis ${per(redisTotal)} commands (${top})`,
    `per accepted send, busiest tables (rows read by sequential scans / fetched by index scans): ${tableLine(d.tables, accepted)}`,
    `per accepted send, busiest indexes (entries read): ${
      Object.entries(d.indexes)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 6)
        .map(([name, n]) => `${name} ${per(n)}`)
        .join(", ") || "-"
    }`,
    ...statementLines(d, accepted),
  ].join("\n    ");
}

/** The statements that took the most execution time, per accepted send (pg_stat_statements only). */
function statementLines(d: CounterDeltas, accepted: number): string[] {
  const ids = new Set(Object.keys(d.statements).map((key) => key.slice(0, key.lastIndexOf("."))));
  const rows = [...ids]
    .map((id) => ({
      id,
      ms: d.statements[`${id}.ms`] ?? 0,
      calls: d.statements[`${id}.calls`] ?? 0,
      wal: d.statements[`${id}.wal_bytes`] ?? 0,
    }))
    .filter((row) => row.calls > 0)
    .sort((a, b) => b.ms - a.ms);
  if (rows.length === 0) return [];
  const total = rows.reduce((sum, row) => sum + row.ms, 0);
  return [
    `per accepted send, Postgres statements (pg_stat_statements): ${fmt((total * 1000) / accepted)} µs executing in all; the busiest:`,
    ...rows
      .slice(0, 10)
      .map(
        (row) =>
          `  ${fmt((row.ms * 1000) / accepted).padStart(4)} µs, ${fmt(row.calls / accepted, 3)} calls, ` +
          `${fmt(row.wal / accepted).padStart(5)} WAL bytes: ${d.statementTexts[row.id] ?? row.id}`,
      ),
  ];
}

function tableLine(tables: Record<string, number>, accepted: number): string {
  const byTable = new Map<string, { seq: number; seqRows: number; idxRows: number }>();
  for (const [key, value] of Object.entries(tables)) {
    const [table = "", metric] = key.split(".");
    const entry = byTable.get(table) ?? { seq: 0, seqRows: 0, idxRows: 0 };
    if (metric === "seq_scan") entry.seq += value;
    if (metric === "seq_tup_read") entry.seqRows += value;
    if (metric === "idx_tup_fetch") entry.idxRows += value;
    byTable.set(table, entry);
  }
  return (
    [...byTable]
      .sort((a, b) => b[1].seqRows + b[1].idxRows - (a[1].seqRows + a[1].idxRows))
      .slice(0, 4)
      .map(
        ([table, e]) =>
          `${table} ${fmt(e.seqRows / accepted, 1)} seq (${fmt(e.seq / accepted, 2)} scans) / ${fmt(e.idxRows / accepted, 1)} idx`,
      )
      .join(", ") || "-"
  );
}
