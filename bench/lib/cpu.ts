/**
 * CPU use over a measured window, per group of processes, and the api's JavaScript thread: where a
 * bench's run spent the machine's cores (bench/send.ts).
 */
import { sql } from "kysely";
import type { Db } from "../../src/db/connect.ts";
import { fmt } from "./format.ts";
import { CLK_TCK, machineTicks, mainThreadSched, pidsNamed, procTicks } from "./proc.ts";

/** Groups of processes by name: each gives its pids when sampled. */
export type CpuGroups = Record<string, () => number[] | Promise<number[]>>;

/** Postgres server processes serving our database (the rest of the server is counted apart). */
async function benchBackends(db: Db): Promise<number[]> {
  // Not this script's own connections ("bench"): its samplers' queries are not the service's cost.
  const rows = await sql<{ pid: number }>`
    SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND application_name IS DISTINCT FROM 'bench'`.execute(db);
  return rows.rows.map((r) => r.pid);
}

/**
 * CPU use over a window, in % of one core, per group. Postgres is split into the backends of the
 * benchmark's database and the rest of the server (WAL writer, checkpointer, other databases).
 */
export async function cpuWindow(groups: CpuGroups, db: Db) {
  const all: CpuGroups = {
    ...groups,
    "postgres (bench db backends)": () => benchBackends(db),
    "postgres (rest of the server)": () => pidsNamed("postgres"),
    redis: () => pidsNamed("redis-server"),
    "this script": () => [process.pid],
  };
  const snapshot = async () => {
    const pids = await Promise.all(Object.values(all).map((f) => f()));
    const seen = new Set<number>();
    return Object.fromEntries(
      Object.keys(all).map((name, i) => {
        // A process counts in the first group that names it.
        const own = (pids[i] ?? []).filter((pid) => !seen.has(pid));
        for (const pid of own) seen.add(pid);
        return [name, new Map(own.map((pid) => [pid, procTicks(pid)] as const))];
      }),
    );
  };
  const started = performance.now();
  const before = await snapshot();
  const machineBefore = machineTicks();
  /** `extra`: CPU seconds of processes that ended inside the window (wrk), by group. */
  return async (extra: Record<string, number> = {}) => {
    const seconds = (performance.now() - started) / 1000;
    const after = await snapshot();
    const machineAfter = machineTicks();
    const result: Record<string, number> = {};
    for (const [name, pids] of Object.entries(after)) {
      let ticks = 0;
      // A process missing from the first snapshot started inside the window (a new pool connection).
      for (const [pid, value] of pids) ticks += value - (before[name]?.get(pid) ?? 0);
      result[name] = (ticks / CLK_TCK / seconds) * 100;
    }
    for (const [name, cpuSeconds] of Object.entries(extra)) result[name] = (cpuSeconds / seconds) * 100;
    const ours = Object.values(result).reduce((a, b) => a + b, 0);
    const cores = navigator.hardwareConcurrency;
    const machine =
      ((machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total)) * 100 * cores;
    // Whatever else ran meanwhile (another build, a test suite): it skews the figures.
    result.other = Math.max(0, machine - ours);
    result.machine = machine;
    return result;
  };
}

export interface ThreadShare {
  runningPct: number;
  waitingForCpuPct: number;
}

/**
 * Over a window, how the server's JavaScript thread spent it: running, or ready to run but waiting
 * for a CPU (other processes had both). Running + waiting near 100% means it is CPU-bound.
 */
export function mainThreadWindow(pid: number): () => ThreadShare {
  const started = performance.now();
  const [run0, wait0] = mainThreadSched(pid);
  return () => {
    const ns = (performance.now() - started) * 1e6;
    const [run1, wait1] = mainThreadSched(pid);
    return { runningPct: ((run1 - run0) / ns) * 100, waitingForCpuPct: ((wait1 - wait0) / ns) * 100 };
  };
}

export function describeThread(t: ThreadShare): string {
  return (
    `server's JavaScript thread: running ${fmt(t.runningPct)}% of the time, ready but waiting for a CPU ` +
    `${fmt(t.waitingForCpuPct)}% (/proc schedstat)`
  );
}

/** Each group's % of one core, and with `perSecond` its CPU milliseconds per `unit` (a send, a message). */
export function describeCpu(cpu: Record<string, number>, perSecond?: number, unit = "send"): string {
  return Object.entries(cpu)
    .map(([name, pct]) => {
      // CPU milliseconds per accepted send, for the processes that do the work.
      const each =
        perSecond && name !== "machine" && name !== "other" && pct >= 1
          ? ` (${fmt((pct * 10) / perSecond, 2)} ms/${unit})`
          : "";
      return `${name} ${fmt(pct)}%${each}`;
    })
    .join(", ");
}
