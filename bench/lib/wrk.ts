/**
 * The load generator: wrk, with bench/send.lua for the send bench (its `BENCH_RESULT` line: every
 * answer counted by HTTP status, batch rows by their status), and wrk's own summary lines.
 */
import { writeFileSync } from "node:fs";
import { ensureWrk } from "../../scripts/services.ts";
import { fmt, ms } from "./format.ts";
import type { Launcher } from "./launcher.ts";

const LUA = new URL("../send.lua", import.meta.url).pathname;

/**
 * wrk's path: installed with apt-get when missing (as `bun run test` installs Chromium); exits
 * with what to do when that is not possible (not root, not Debian).
 */
export async function requireWrk(tool: string): Promise<string> {
  try {
    return await ensureWrk((message) => console.log(`${tool}: ${message}`));
  } catch (error) {
    console.error(`${tool}: ${(error as Error).message}`);
    process.exit(1);
  }
}

/** wrk's own summary lines: Requests/sec, requests, non-2xx/3xx answers, and (--latency) its percentiles in ms. */
export function wrkSummary(output: string) {
  const value = (pattern: RegExp) => Number(pattern.exec(output)?.[1] ?? Number.NaN);
  return {
    requestsPerSecond: value(/Requests\/sec:\s+([\d.]+)/),
    requests: value(/(\d+) requests in/),
    non2xx: value(/Non-2xx or 3xx responses:\s+(\d+)/) || 0,
    latencyMs(q: number): number {
      const match = new RegExp(`^\\s+${q}%\\s+([\\d.]+)(us|ms|s)\\s*$`, "m").exec(output);
      if (!match) return Number.NaN;
      return Number(match[1]) * ({ us: 0.001, ms: 1, s: 1000 } as const)[match[2] as "us" | "ms" | "s"];
    },
  };
}

export interface WrkResult {
  label: string;
  seconds: number;
  requests: number;
  statuses: Record<string, number>;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  latencyUs: { p50: number; p90: number; p99: number; max: number; mean: number };
  samples: string[];
  /** Batch mode: the items of the answered batches by the status of their row. */
  items: Record<string, number>;
  /** wrk's own "Non-2xx or 3xx responses" line (0 when absent) and Requests/sec. */
  non2xx: number;
  requestsPerSecond: number;
  /** Accepted sends: 201 responses, or in batch mode rows with status 201. */
  accepted: number;
  /** Accepted sends per second: only they count. */
  createdPerSecond: number;
  /** CPU seconds wrk itself used. */
  cpuSeconds: number;
}

export interface SendLoad {
  wrk: string;
  threads: number;
  connections: number;
  /** Sends per POST /v2/messages/batch; 0: single sends. */
  batch: number;
  /** Makes each run's Idempotency-Keys unique. */
  runId: string;
}

/** One wrk run of bench/send.lua against `url`, rotating over the tokens of `tokensFile`. */
export async function runWrk(
  launcher: Launcher,
  load: SendLoad,
  label: string,
  url: string,
  seconds: number,
  tokensFile: string,
): Promise<WrkResult> {
  const proc = Bun.spawn(
    [
      load.wrk,
      `-t${load.threads}`,
      `-c${load.connections}`,
      `-d${seconds}s`,
      "--timeout",
      "10s",
      "--latency",
      "-s",
      LUA,
      url,
      "--",
      tokensFile,
      `${load.runId}-${label}`,
      String(load.batch),
    ],
    { cwd: launcher.cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" },
  );
  const { log } = launcher.adopt(`wrk-${label}`, proc);
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  const code = await proc.exited;
  const usage = proc.resourceUsage();
  writeFileSync(log, `${out}\n${err}`);
  const line = out.split("\n").find((l) => l.startsWith("BENCH_RESULT "));
  if (code !== 0 || !line) throw new Error(`wrk ${label} failed (exit ${code}): ${err || out}`);
  const raw = JSON.parse(line.slice("BENCH_RESULT ".length)) as {
    duration_us: number;
    requests: number;
    statuses: Record<string, number>;
    errors: WrkResult["errors"];
    latency_us: WrkResult["latencyUs"];
    samples: string[];
    items: Record<string, number>;
  };
  const secondsRun = raw.duration_us / 1e6;
  const accepted = load.batch > 0 ? (raw.items["201"] ?? 0) : (raw.statuses["201"] ?? 0);
  const summary = wrkSummary(out);
  return {
    label,
    seconds: secondsRun,
    requests: raw.requests,
    statuses: raw.statuses,
    errors: raw.errors,
    latencyUs: raw.latency_us,
    samples: raw.samples,
    items: raw.items,
    non2xx: summary.non2xx,
    requestsPerSecond: summary.requestsPerSecond,
    accepted,
    createdPerSecond: accepted / secondsRun,
    cpuSeconds: usage ? Number(usage.cpuTime.total) / 1e6 : 0,
  };
}

/** The run's lines: accepted/s, latencies, statuses and socket errors, sample answers. */
export function describeWrk(result: WrkResult, batch: number): string {
  const statuses = Object.entries(result.statuses)
    .map(([status, n]) => `${status}: ${fmt(n)}`)
    .join(", ");
  const e = result.errors;
  const socket = e.connect + e.read + e.write + e.timeout;
  const items = Object.entries(result.items)
    .map(([status, n]) => `${status}: ${fmt(n)}`)
    .join(", ");
  const rate =
    batch > 0
      ? `${fmt(result.createdPerSecond)} messages created (rows 201)/s in ${fmt(result.requestsPerSecond, 1)} calls/s of ${fmt(batch)} items ` +
        `in ${fmt(result.seconds, 1)} s; rows {${items}}`
      : `${fmt(result.createdPerSecond)} created (201)/s of ${fmt(result.requestsPerSecond)} req/s in ${fmt(result.seconds, 1)} s`;
  return [
    rate,
    `${batch > 0 ? "per call: " : ""}p50 ${ms(result.latencyUs.p50)}, p90 ${ms(result.latencyUs.p90)}, p99 ${ms(result.latencyUs.p99)}, max ${ms(result.latencyUs.max)}`,
    `statuses {${statuses}}; wrk non-2xx/3xx: ${fmt(result.non2xx)}; socket errors: ${socket ? JSON.stringify(e) : 0}`,
    ...result.samples.map((s) => `  e.g. ${s}`),
  ].join("\n    ");
}
