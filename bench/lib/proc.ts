/** CPU time from Linux's /proc: of a process, of its main thread, of the whole machine. */
import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second, the unit of /proc/<pid>/stat's times. */
export const CLK_TCK = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

/** CPU time of a process (user + system), in clock ticks; 0 when it is gone. */
export function procTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return Number(fields[11]) + Number(fields[12]); // utime + stime
  } catch {
    return 0;
  }
}

/** CPU seconds a process has used (user + system). */
export const cpuSeconds = (pid: number): number => procTicks(pid) / CLK_TCK;

/** The processes whose command name (/proc/<pid>/comm) is `comm`. */
export function pidsNamed(comm: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() === comm) pids.push(Number(entry));
    } catch {}
  }
  return pids;
}

/** The machine's clock ticks so far (/proc/stat): busy (all but idle and iowait) and total. */
export function machineTicks(): { busy: number; total: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0] ?? "";
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const total = values.slice(0, 8).reduce((a, b) => a + b, 0);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  return { busy: total - idle, total };
}

/** The main (JavaScript) thread of a process: [ns on a CPU, ns runnable but waiting for one]. */
export function mainThreadSched(pid: number): [number, number] {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ").map(Number);
    return [run ?? 0, wait ?? 0];
  } catch {
    return [0, 0];
  }
}
