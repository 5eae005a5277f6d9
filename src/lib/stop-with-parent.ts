/**
 * For a process `bun run start` started (scripts/start.ts gives each an IPC channel): `stop` runs
 * when that channel closes, i.e. when start.ts is gone however it went (SIGKILL included), so that
 * no api or worker outlives the script that owns it. A process started any other way (systemd, a
 * container, a shell) has no channel and is left alone.
 */
export function stopWithParent(stop: (reason: string) => void): void {
  if (typeof process.send !== "function") return;
  process.on("disconnect", () => stop("parent gone"));
}
