/**
 * `bun run test`: makes sure the local PostgreSQL and Redis answer (starting installed ones) and that
 * Chromium is installed (the panel's browser tests), then runs the whole suite: every file of test/
 * in a `bun test` process of its own, several at a time (scripts/test-lanes.ts; each file has its own
 * database and Redis prefix). Options:
 *
 *   --jobs N          files at a time (TEST_JOBS, default 3)
 *   --files LIST      only these files (comma-separated paths), still in lanes
 *   --cluster-files   only the files CI runs again on a Redis Cluster (scripts/cluster-tests.ts)
 *
 * Any other arguments (a file, `-t name`) go to ONE `bun test` process, as `bun test` itself takes them.
 */
import { Glob } from "bun";
import { loadConfig } from "../src/config.ts";
import { runsOnCluster } from "./cluster-tests.ts";
import { ensureChromium, ensureServices } from "./services.ts";
import { runInLanes } from "./test-lanes.ts";

const say = (message: string) => console.log(`[test] ${message}`);
const BUN_TEST_ARGS = ["--timeout", "60000"];

interface TestArgs {
  jobs: number;
  files?: string[];
  clusterFiles: boolean;
  passThrough: string[];
}

function parseArgs(argv: string[]): TestArgs {
  let jobs = Number(process.env.TEST_JOBS ?? 3);
  let files: string[] | undefined;
  let clusterFiles = false;
  const passThrough: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--cluster-files") clusterFiles = true;
    else if (arg === "--jobs" || arg === "--files") {
      const value = argv[++i];
      if (value === undefined) throw new Error(`${arg} needs a value`);
      if (arg === "--jobs") jobs = Number(value);
      else files = value.split(",").filter((file) => file !== "");
    } else passThrough.push(arg);
  }
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error("--jobs (TEST_JOBS) must be a positive integer");
  return { jobs, files, clusterFiles, passThrough };
}

const args = parseArgs(process.argv.slice(2));
await ensureServices(loadConfig({ NODE_ENV: "development" }), say);
await ensureChromium(say);
// The tests and the processes they spawn run with the development defaults unless NODE_ENV is set
// (`bun test` alone would set "test", which is not development: secrets would be required).
const env = { ...process.env, NODE_ENV: process.env.NODE_ENV || "development" };

if (args.passThrough.length > 0) {
  const proc = Bun.spawn(["bun", "test", ...BUN_TEST_ARGS, ...args.passThrough], {
    stdio: ["inherit", "inherit", "inherit"],
    env,
  });
  process.exit(await proc.exited);
}

const everyFile = [...new Glob("test/**/*.test.ts").scanSync(".")].sort();
const files = args.files ?? (args.clusterFiles ? everyFile.filter(runsOnCluster) : everyFile);
const result = await runInLanes(files, {
  jobs: args.jobs,
  bunTestArgs: BUN_TEST_ARGS,
  env,
  label: "[test]",
  durationsFile: "node_modules/.cache/test-durations.json",
});
process.exit(result.failedFiles.length === 0 && result.failed === 0 ? 0 : 1);
