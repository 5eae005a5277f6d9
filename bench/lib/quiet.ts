/** The benches' check for a quiet machine (figures from a shared one mean little). */
import { machineTicks } from "./proc.ts";

/** CPU busy share of the machine over one second, 0 to 1 (/proc/stat). */
export async function cpuBusy(): Promise<number> {
  const before = machineTicks();
  await Bun.sleep(1000);
  const after = machineTicks();
  return (after.busy - before.busy) / Math.max(1, after.total - before.total);
}

/** CPU the machine uses now (measured over a second), in % of one core. */
export async function machineLoad(): Promise<number> {
  return (await cpuBusy()) * 100 * navigator.hardwareConcurrency;
}

/** Waits (bounded) for three quiet seconds in a row; false when they did not come. */
export async function waitForQuietMachine(maxSeconds: number): Promise<boolean> {
  let quiet = 0;
  for (let second = 0; second < maxSeconds; second++) {
    quiet = (await cpuBusy()) < 0.15 ? quiet + 1 : 0;
    if (quiet >= 3) return true;
  }
  return false;
}
