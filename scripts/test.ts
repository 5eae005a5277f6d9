/**
 * `bun run test`: makes sure the local PostgreSQL and Redis answer (starting installed ones) and that
 * Chromium is installed (the panel's browser tests), then runs the whole suite. Extra arguments go
 * to `bun test` (a file, `-t name`).
 */
import { loadConfig } from "../src/config.ts";
import { ensureChromium, ensureServices } from "./services.ts";

const say = (message: string) => console.log(`[test] ${message}`);
await ensureServices(loadConfig({ NODE_ENV: "development" }), say);
await ensureChromium(say);
// The tests and the processes they spawn run with the development defaults unless NODE_ENV is set
// (`bun test` alone would set "test", which is not development: secrets would be required).
const proc = Bun.spawn(["bun", "test", "--timeout", "60000", ...process.argv.slice(2)], {
  stdio: ["inherit", "inherit", "inherit"],
  env: { ...process.env, NODE_ENV: process.env.NODE_ENV || "development" },
});
process.exit(await proc.exited);
