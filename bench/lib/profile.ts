/** CPU profiles of the processes a bench starts: Bun's profiler, a `.cpuprofile` and a Markdown summary. */

/** The flags that run a bun process under the profiler, its profile written to `dir` when it stops. */
export const profilerFlags = (dir: string): string[] => [
  "--cpu-prof",
  "--cpu-prof-md",
  `--cpu-prof-dir=${dir}`,
];

/** The command that runs `entry` with bun, under the profiler when `profileDir` is given. */
export const bunCommand = (entry: string, profileDir?: string): string[] =>
  profileDir ? ["bun", ...profilerFlags(profileDir), entry] : ["bun", entry];

/** Where the profiles of `processes` (name and pid) are, once each has stopped. */
export const profilesNote = (dir: string, processes: { name: string; pid: number }[]): string =>
  `CPU profiles: ${dir}/CPU.*.<pid>.*.md, written when each process stops (${processes
    .map((p) => `${p.name} ${p.pid}`)
    .join(", ")})`;
