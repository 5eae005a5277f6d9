import { expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";

/**
 * Every bench answers `--help` with its usage and exit code 0, at once (issue 42, item 16:
 * `bench/webhooks.ts --help` threw; others ignored it and started the whole run).
 */
const BENCH = join(import.meta.dir, "../../bench");
const benches = readdirSync(BENCH).filter((name) => name.endsWith(".ts"));

test.each(benches)(
  "bun bench/%s --help prints its usage and starts nothing",
  async (name) => {
    const proc = Bun.spawn(["bun", join(BENCH, name), "--help"], {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const code = await Promise.race([proc.exited, Bun.sleep(15_000).then(() => "still running")]);
    proc.kill("SIGKILL");
    const [stdout, stderr] = [await new Response(proc.stdout).text(), await new Response(proc.stderr).text()];
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
    expect(stdout).toStartWith(`bun bench/${name}`);
  },
  30_000,
);
