/**
 * Runs test files in parallel lanes: each file in a `bun test` process of its own (every file already
 * has its own database and Redis key prefix, so files are independent), at most `jobs` at a time,
 * the slowest first. A file's output is printed whole when it ends, headed by its name and duration,
 * so parallel files never interleave; the end repeats what failed and prints bun's own summary lines
 * (" N pass", " M fail") with the counts of every file added up.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

export interface LaneOptions {
  jobs: number;
  /** Arguments for every `bun test` (before the file). */
  bunTestArgs: string[];
  env: Record<string, string | undefined>;
  /** Prefix of every line this runner prints itself, e.g. "[test]". */
  label: string;
  /** Where each file's last duration is kept, to start the slowest first next time. */
  durationsFile: string;
}

export interface LaneResult {
  passed: number;
  failed: number;
  /** Files whose `bun test` exited non-zero. */
  failedFiles: string[];
  seconds: number;
}

interface FileRun {
  file: string;
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

async function runFile(file: string, options: LaneOptions): Promise<FileRun> {
  const started = performance.now();
  const proc = Bun.spawn(["bun", "test", ...options.bunTestArgs, `./${file}`], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: options.env,
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
    file,
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

/**
 * Longest first: by the last run's duration; files never timed (every file on a clean clone) first,
 * browser tests (a Chromium each, the longest files) before the rest, then larger files first.
 */
export function scheduleOrder(files: string[], durations: Record<string, number>): string[] {
  const size = (file: string) => (existsSync(file) ? readFileSync(file).length : 0);
  const browser = (file: string) => (file.includes(".browser.") ? 1 : 0);
  return [...files].sort((a, b) => {
    const da = durations[a];
    const db = durations[b];
    if (da === undefined && db === undefined) return browser(b) - browser(a) || size(b) - size(a);
    if (da === undefined) return -1;
    if (db === undefined) return 1;
    return db - da;
  });
}

export async function runInLanes(files: string[], options: LaneOptions): Promise<LaneResult> {
  const say = (message: string) => console.log(`${options.label} ${message}`);
  const started = performance.now();
  const durations = readDurations(options.durationsFile);
  const queue = scheduleOrder(files, durations);
  const runs: FileRun[] = [];
  say(`${files.length} files in ${options.jobs} parallel lanes`);
  const lane = async () => {
    for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
      const run = await runFile(file, options);
      runs.push(run);
      const verdict = run.code === 0 ? "ok" : `FAILED (exit ${run.code})`;
      console.log(`\n${options.label} ── ${file} (${run.seconds.toFixed(1)} s, ${verdict})`);
      process.stdout.write(run.output.endsWith("\n") ? run.output : `${run.output}\n`);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.jobs) }, lane));

  for (const run of runs) durations[run.file] = Math.round(run.seconds * 10) / 10;
  try {
    mkdirSync(dirname(options.durationsFile), { recursive: true });
    writeFileSync(options.durationsFile, `${JSON.stringify(durations, null, 1)}\n`);
  } catch {
    // Only an ordering hint for the next run.
  }

  const seconds = (performance.now() - started) / 1000;
  const slowest = [...runs].sort((a, b) => b.seconds - a.seconds).slice(0, 8);
  say(`slowest files: ${slowest.map((run) => `${run.file} ${run.seconds.toFixed(0)} s`).join(", ")}`);
  const failedRuns = runs.filter((run) => run.code !== 0);
  for (const run of failedRuns) say(`FAILED ${run.file}`);
  const passed = runs.reduce((sum, run) => sum + run.passed, 0);
  const failed = runs.reduce((sum, run) => sum + run.failed, 0);
  // The shape of bun test's own summary, so tools that read it (.ci/run) read the totals.
  console.log(
    `\n ${passed} pass\n ${failed} fail\nRan ${passed + failed} tests across ${runs.length} files. [${seconds.toFixed(1)}s]`,
  );
  return { passed, failed, failedFiles: failedRuns.map((run) => run.file), seconds };
}
