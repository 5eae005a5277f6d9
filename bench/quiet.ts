/** The benchmarks' check for a quiet machine (figures from a shared one mean little). */

/** CPU busy share over one second, from /proc/stat (Linux). */
export async function cpuBusy(): Promise<number> {
  const sample = async () => {
    const fields = ((await Bun.file("/proc/stat").text()).split("\n")[0] ?? "")
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
    return { idle, total: fields.reduce((sum, value) => sum + value, 0) };
  };
  const before = await sample();
  await Bun.sleep(1000);
  const after = await sample();
  return 1 - (after.idle - before.idle) / Math.max(1, after.total - before.total);
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
