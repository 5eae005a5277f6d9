/**
 * A private Postgres that loads pg_stat_statements, for the benches' per-statement figures: the
 * shared server on 5432 does not load it, and it must not be restarted. Every database created in it
 * has the extension (it is created in template1), so `bench/send.ts` prints which statements took the
 * time of a send. Runs until Ctrl-C (or SIGTERM), then stops its server.
 *
 *   bun bench/stats-postgres.ts [--port 55432]
 *   BENCH_PG_BASE=postgres://postgres@127.0.0.1:55432 bun bench/send.ts --mode drain
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { findPgTools, privatePostgres } from "../scripts/private-postgres.ts";
import { exitOnHelp } from "./lib/usage.ts";

exitOnHelp(`bun bench/stats-postgres.ts [--port 55432]
  A private Postgres with pg_stat_statements, until Ctrl-C; then, in another shell:
  BENCH_PG_BASE=postgres://postgres@127.0.0.1:55432 bun bench/send.ts --mode drain`);

const portAt = process.argv.indexOf("--port");
const port = portAt > 0 ? Number(process.argv[portAt + 1]) : 55432;
const tools = findPgTools();
if ("problem" in tools) {
  console.error(tools.problem);
  process.exit(1);
}
const home = mkdtempSync(join(tmpdir(), "stats-postgres-"));
const server = privatePostgres({
  tools,
  home: join(home, "pg"),
  port,
  commandLog: join(home, "commands.log"),
  settings: [
    "shared_preload_libraries=pg_stat_statements",
    "pg_stat_statements.track=top",
    "max_connections=300",
  ],
});
await server.init();
await server.start();
const client = new pg.Client({ connectionString: server.url("template1") });
await client.connect();
await client.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
await client.end();
console.log(`ready: BENCH_PG_BASE=postgres://postgres@127.0.0.1:${port} (data and log in ${home})`);

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  await server.stop("fast");
  process.exit(0);
}
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
setInterval(() => {}, 60_000);
