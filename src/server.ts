import { createApp } from "./app.ts";
import { loadConfigOrExit } from "./config.ts";
import { ensureDatabase } from "./db/connect.ts";
import { migrate } from "./db/migrate.ts";
import { buildDeps, closeDeps } from "./deps.ts";
import { stopWithParent } from "./lib/stop-with-parent.ts";

/** The api process: migrate (idempotent, safe beside other starters), then serve. */
const config = loadConfigOrExit();
await ensureDatabase(config.databaseUrl);
const deps = buildDeps(config);
const applied = await migrate(deps.db);
if (applied.length > 0) deps.logger.info({ applied }, "migrations applied");

// API_PROCESSES > 1: scripts/start.ts runs that many of us on one port, and the kernel spreads the
// connections over them (SO_REUSEPORT). Alone, a second process on the port is an error, not a twin.
const app = createApp(deps).listen({
  port: config.port,
  hostname: "0.0.0.0",
  reusePort: config.processes.api > 1,
});
// Other api processes answer /metrics for this one too (src/metrics/publish.ts).
deps.metricsPublisher.start();
deps.logger.info({ port: config.port, base_url: config.publicBaseUrl }, "api listening");
// scripts/start.ts waits for this: with several api processes on one port, /healthz answering does
// not say which one listens.
process.send?.({ listening: config.port });

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  deps.logger.info({ signal }, "api stopping: finishing in-flight requests");
  await app.stop(false);
  // Bounded: a request stuck on a dead dependency must not keep the process alive forever.
  const deadline = Date.now() + 10_000;
  // The pipeline counts requests still running, including ones whose client has gone.
  while (app.store.inFlight > 0 && Date.now() < deadline) await Bun.sleep(20);
  await closeDeps(deps);
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
stopWithParent((reason) => void shutdown(reason));
