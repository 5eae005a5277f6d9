/**
 * `bun run test`: makes sure the local PostgreSQL and Redis answer (starting installed ones) and that
 * Chromium is installed (the panel's browser tests), then runs the whole suite: every file of test/
 * in a `bun test` process of its own, several at a time (scripts/test-lanes.ts; each file has its own
 * database, copied from a migrated template (scripts/test-template.ts), and its own Redis prefix).
 * Options:
 *
 *   --jobs N          files at a time (TEST_JOBS, default 3)
 *   --files LIST      only these files (comma-separated paths), still in lanes
 *   --cluster-files   only the files CI runs again on a Redis Cluster (scripts/cluster-tests.ts)
 *   --cluster         also those files on a local Redis Cluster this starts (scripts/redis-cluster.ts)
 *   --sdk             also the SDK's tests (sdk/test/: the client against the real service)
 *
 * With --cluster or --sdk, one pool of lanes serves every suite, and the end prints a line per suite.
 * Any other arguments (a file, `-t name`) go to ONE `bun test` process, as `bun test` itself takes them.
 */
import { Glob } from "bun";
import { loadConfig } from "../src/config.ts";
import { runsOnCluster } from "./cluster-tests.ts";
import { type LocalCluster, startRedisCluster } from "./redis-cluster.ts";
import { ensureChromium, ensureServices } from "./services.ts";
import { type LaneItem, runInLanes } from "./test-lanes.ts";
import { prepareTemplateDatabase } from "./test-template.ts";

const say = (message: string) => console.log(`[test] ${message}`);
const BUN_TEST_ARGS = ["--timeout", "60000"];
const PG_BASE = process.env.TEST_DATABASE_BASE ?? "postgres://postgres@127.0.0.1:5432";

interface TestArgs {
  jobs: number;
  files?: string[];
  clusterFiles: boolean;
  cluster: boolean;
  sdk: boolean;
  passThrough: string[];
}

function parseArgs(argv: string[]): TestArgs {
  const args: TestArgs = {
    jobs: Number(process.env.TEST_JOBS ?? 3),
    clusterFiles: false,
    cluster: false,
    sdk: false,
    passThrough: [],
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--cluster-files") args.clusterFiles = true;
    else if (arg === "--cluster") args.cluster = true;
    else if (arg === "--sdk") args.sdk = true;
    else if (arg === "--jobs" || arg === "--files") {
      const value = argv[++i];
      if (value === undefined) throw new Error(`${arg} needs a value`);
      if (arg === "--jobs") args.jobs = Number(value);
      else args.files = value.split(",").filter((file) => file !== "");
    } else args.passThrough.push(arg);
  }
  if (!Number.isInteger(args.jobs) || args.jobs < 1)
    throw new Error("--jobs (TEST_JOBS) must be a positive integer");
  return args;
}

const args = parseArgs(process.argv.slice(2));
await ensureServices(loadConfig({ NODE_ENV: "development" }), say);
await ensureChromium(say);
// The tests and the processes they spawn run with the development defaults unless NODE_ENV is set
// (`bun test` alone would set "test", which is not development: secrets would be required).
const env = {
  ...process.env,
  NODE_ENV: process.env.NODE_ENV || "development",
  TEST_TEMPLATE_DATABASE: await prepareTemplateDatabase(PG_BASE),
};

if (args.passThrough.length > 0) {
  const proc = Bun.spawn(["bun", "test", ...BUN_TEST_ARGS, ...args.passThrough], {
    stdio: ["inherit", "inherit", "inherit"],
    env,
  });
  process.exit(await proc.exited);
}

const scan = (pattern: string) => [...new Glob(pattern).scanSync(".")].sort();
const everyFile = scan("test/**/*.test.ts");
const files = args.files ?? (args.clusterFiles ? everyFile.filter(runsOnCluster) : everyFile);
const items: LaneItem[] = files.map((file) => ({ file, suite: "tests", env }));
let cluster: LocalCluster | undefined;
if (args.cluster) {
  cluster = await startRedisCluster();
  say(`a Redis Cluster for the cluster suite: ${cluster.nodes}`);
  const clusterEnv = { ...env, REDIS_CLUSTER_NODES: cluster.nodes };
  for (const file of everyFile.filter(runsOnCluster))
    items.push({ file, suite: "tests on a Redis Cluster", env: clusterEnv });
}
if (args.sdk) for (const file of scan("sdk/test/**/*.test.ts")) items.push({ file, suite: "sdk", env });

const stopCluster = () => cluster?.stop();
process.on("SIGINT", () => void Promise.resolve(stopCluster()).then(() => process.exit(130)));
process.on("SIGTERM", () => void Promise.resolve(stopCluster()).then(() => process.exit(143)));
const results = await runInLanes(items, {
  jobs: args.jobs,
  bunTestArgs: BUN_TEST_ARGS,
  label: "[test]",
  durationsFile: "node_modules/.cache/test-durations.json",
}).finally(stopCluster);
const allPassed = [...results.values()].every(
  (suite) => suite.failed === 0 && suite.failedFiles.length === 0,
);
process.exit(allPassed ? 0 : 1);
