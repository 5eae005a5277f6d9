/**
 * Runs test files in parallel lanes: each file in a `bun test` process of its own (every file already
 * has its own database and Redis key prefix, so files are independent), at most `jobs` at a time,
 * the slowest first. Files may belong to several suites (the suite, the same files again on a Redis
 * Cluster, the SDK's): one pool of lanes serves them all, so no lane idles while another suite still
 * has files. A file's output is printed whole when it ends, headed by its name, suite and duration,
 * so parallel files never interleave; the end repeats what failed, prints a line per suite
 * ("<suite>: N passed, M failed") and bun's own summary lines (" N pass", " M fail") for all of them.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

/** One file to run, in one suite, with that suite's environment. */
export interface LaneItem {
  file: string;
  suite: string;
  env: Record<string, string | undefined>;
}

export interface LaneOptions {
  jobs: number;
  /** Arguments for every `bun test` (before the file). */
  bunTestArgs: string[];
  /** Prefix of every line this runner prints itself, e.g. "[test]". */
  label: string;
  /** Where each file's last duration is kept, to start the slowest first next time. */
  durationsFile: string;
}

export interface SuiteResult {
  passed: number;
  failed: number;
  /** Files whose `bun test` exited non-zero. */
  failedFiles: string[];
}

interface FileRun {
  item: LaneItem;
  code: number;
  output: string;
  seconds: number;
  passed: number;
  failed: number;
}

/** bun test's own count in its summary (" 12 pass"), or undefined when it printed none. */
function summaryCount(output: string, word: "pass" | "fail"): number | undefined {
  const matches = [...output.matchAll(new RegExp(`^ *(\\d+) ${word}$`, "gm"))];
  const last = matches.at(-1);
  return last ? Number(last[1]) : undefined;
}

async function runFile(item: LaneItem, options: LaneOptions): Promise<FileRun> {
  const started = performance.now();
  const proc = Bun.spawn(["bun", "test", ...options.bunTestArgs, `./${item.file}`], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: item.env,
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  const output = out + err;
  const passed = summaryCount(output, "pass") ?? 0;
  // A file that died before its summary counts as one failure, so a crash is never a pass.
  const failed = summaryCount(output, "fail") ?? (code === 0 ? 0 : 1);
  return {
    item,
    code,
    output,
    seconds: (performance.now() - started) / 1000,
    passed,
    failed: code !== 0 && failed === 0 ? 1 : failed,
  };
}

function readDurations(path: string): Record<string, number> {
  try {
    return JSON.parse(readFileSync(path, "utf8")) as Record<string, number>;
  } catch {
    return {};
  }
}

const durationKey = (item: LaneItem) => `${item.suite} ${item.file}`;

/**
 * Longest first: by the last run's duration; files never timed (every file on a clean clone) first,
 * browser tests (a Chromium each, the longest files) before the rest, then larger files first.
 */
export function scheduleOrder(items: LaneItem[], durations: Record<string, number>): LaneItem[] {
  const size = (file: string) => (existsSync(file) ? readFileSync(file).length : 0);
  const browser = (file: string) => (file.includes(".browser.") ? 1 : 0);
  return [...items].sort((a, b) => {
    const da = durations[durationKey(a)];
    const db = durations[durationKey(b)];
    if (da === undefined && db === undefined)
      return browser(b.file) - browser(a.file) || size(b.file) - size(a.file);
    if (da === undefined) return -1;
    if (db === undefined) return 1;
    return db - da;
  });
}

export async function runInLanes(items: LaneItem[], options: LaneOptions): Promise<Map<string, SuiteResult>> {
  const say = (message: string) => console.log(`${options.label} ${message}`);
  const started = performance.now();
  const durations = readDurations(options.durationsFile);
  const queue = scheduleOrder(items, durations);
  const runs: FileRun[] = [];
  const suites = [...new Set(items.map((item) => item.suite))];
  say(`${items.length} files (${suites.join(", ")}) in ${options.jobs} parallel lanes`);
  const lane = async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) {
      const run = await runFile(item, options);
      runs.push(run);
      const verdict = run.code === 0 ? "ok" : `FAILED (exit ${run.code})`;
      console.log(
        `\n${options.label} ── ${item.file} [${item.suite}] (${run.seconds.toFixed(1)} s, ${verdict})`,
      );
      process.stdout.write(run.output.endsWith("\n") ? run.output : `${run.output}\n`);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.jobs) }, lane));

  for (const run of runs) durations[durationKey(run.item)] = Math.round(run.seconds * 10) / 10;
  try {
    mkdirSync(dirname(options.durationsFile), { recursive: true });
    writeFileSync(options.durationsFile, `${JSON.stringify(durations, null, 1)}\n`);
  } catch {
    // Only an ordering hint for the next run.
  }

  const seconds = (performance.now() - started) / 1000;
  const slowest = [...runs].sort((a, b) => b.seconds - a.seconds).slice(0, 8);
  say(
    `slowest files: ${slowest.map((run) => `${run.item.file} [${run.item.suite}] ${run.seconds.toFixed(0)} s`).join(", ")}`,
  );
  const results = new Map<string, SuiteResult>();
  for (const suite of suites) {
    const ofSuite = runs.filter((run) => run.item.suite === suite);
    const failedFiles = ofSuite.filter((run) => run.code !== 0).map((run) => run.item.file);
    for (const file of failedFiles) say(`FAILED ${file} [${suite}]`);
    results.set(suite, {
      passed: ofSuite.reduce((sum, run) => sum + run.passed, 0),
      failed: ofSuite.reduce((sum, run) => sum + run.failed, 0),
      failedFiles,
    });
  }
  console.log();
  for (const [suite, result] of results)
    console.log(`${suite}: ${result.passed} passed, ${result.failed} failed`);
  const passed = runs.reduce((sum, run) => sum + run.passed, 0);
  const failed = runs.reduce((sum, run) => sum + run.failed, 0);
  // The shape of bun test's own summary, so tools that read it read the totals.
  console.log(
    `\n ${passed} pass\n ${failed} fail\nRan ${passed + failed} tests across ${runs.length} files. [${seconds.toFixed(1)}s]`,
  );
  return results;
}
