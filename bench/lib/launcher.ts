/**
 * The processes a bench starts (bench/send.ts): each one's output in `<runDir>/<name>.log`, an exit
 * nobody asked for remembered (it fails the run), all stopped at the end in a given order.
 */
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";

export interface Child {
  name: string;
  proc: Subprocess;
  log: string;
  /** An exit nobody asked for (the api crashing mid-run) fails the run. */
  expectedExit: boolean;
}

export class Launcher {
  readonly children: Child[] = [];
  /** The first exit nobody asked for. */
  unexpectedExit: string | undefined;
  private stopping = false;

  constructor(
    readonly runDir: string,
    readonly cwd: string,
  ) {}

  /** Starts `cmd`; `onMessage` hears what the child sends over IPC (`process.send`). */
  spawn(
    name: string,
    cmd: string[],
    env: Record<string, string | undefined>,
    onMessage?: (message: unknown) => void,
  ): Child {
    const log = join(this.runDir, `${name}.log`);
    const fd = openSync(log, "a");
    const proc = Bun.spawn(cmd, {
      cwd: this.cwd,
      env,
      stdin: "ignore",
      stdout: fd,
      stderr: fd,
      ...(onMessage && { ipc: onMessage }),
    });
    closeSync(fd);
    const child: Child = { name, proc, log, expectedExit: false };
    this.children.push(child);
    void proc.exited.then((code) => {
      if (!child.expectedExit && !this.stopping) {
        this.unexpectedExit ??= `${name} exited with code ${code} (log: ${log})`;
      }
    });
    return child;
  }

  /** A process started elsewhere (wrk, whose output the caller reads), stopped with the rest. */
  adopt(name: string, proc: Subprocess): Child {
    const child: Child = { name, proc, log: join(this.runDir, `${name}.log`), expectedExit: true };
    this.children.push(child);
    return child;
  }

  /** Throws when a process exited that nobody stopped. */
  check(): void {
    if (this.unexpectedExit) throw new Error(this.unexpectedExit);
  }

  /** SIGTERM, then SIGKILL after `graceMs`. */
  async stop(child: Child, graceMs = 10_000): Promise<void> {
    child.expectedExit = true;
    if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
    child.proc.kill("SIGTERM");
    const done = await Promise.race([
      child.proc.exited.then(() => true),
      Bun.sleep(graceMs).then(() => false),
    ]);
    if (!done) {
      child.proc.kill("SIGKILL");
      await child.proc.exited;
    }
  }

  /**
   * Stops everything: the processes whose names start with `first`'s prefixes one at a time in that
   * order (load generators, then what feeds the others), then all the rest together.
   */
  async stopAll(first: string[]): Promise<void> {
    this.stopping = true;
    const order = (c: Child) => {
      const i = first.findIndex((prefix) => c.name.startsWith(prefix));
      return i < 0 ? first.length : i;
    };
    const live = [...this.children].sort((a, b) => order(a) - order(b));
    for (const child of live.filter((c) => order(c) < first.length)) await this.stop(child);
    await Promise.all(live.filter((c) => order(c) === first.length).map((c) => this.stop(c)));
  }
}

/**
 * Runs `cleanup` once on SIGINT/SIGTERM (exit 130) or when the run passes `limitSeconds` (exit 2);
 * the returned function disarms the time limit.
 */
export function guardRun(tool: string, limitSeconds: number, cleanup: () => Promise<void>): () => void {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      console.error(`${tool}: ${signal}, stopping everything`);
      void cleanup().then(() => process.exit(130));
    });
  }
  const watchdog = setTimeout(() => {
    console.error(`${tool}: time limit of ${limitSeconds} s reached, stopping everything`);
    void cleanup().then(() => process.exit(2));
  }, limitSeconds * 1000);
  return () => clearTimeout(watchdog);
}
