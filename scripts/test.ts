/**
 * `bun run test`: makes sure the local PostgreSQL and Redis answer (starting installed ones), then
 * runs the whole suite. Extra arguments go to `bun test` (a file, `-t name`).
 */
import { loadConfig } from "../src/config.ts";
import { ensureServices } from "./services.ts";

await ensureServices(loadConfig({}), (message) => console.log(`[test] ${message}`));
const proc = Bun.spawn(["bun", "test", "--timeout", "60000", ...process.argv.slice(2)], {
  stdio: ["inherit", "inherit", "inherit"],
});
process.exit(await proc.exited);
