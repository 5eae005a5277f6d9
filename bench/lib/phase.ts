/**
 * One measured phase of bench/send.ts (the baseline's, the api's): a wait for a quiet machine, the
 * wrk warm-up, an ANALYZE, then the measured wrk run with the CPU of every process group, the api's
 * JavaScript thread, and whatever else the caller samples meanwhile.
 */
import { sql } from "kysely";
import type { Db } from "../../src/db/connect.ts";
import { type CpuGroups, cpuWindow, mainThreadWindow, type ThreadShare } from "./cpu.ts";
import { fmt, say } from "./format.ts";
import type { Launcher } from "./launcher.ts";
import { machineLoad } from "./quiet.ts";
import { runWrk, type SendLoad, type WrkResult } from "./wrk.ts";

export interface PhaseSettings {
  load: SendLoad;
  /** Seconds of the warm-up (0: none) and of the measured run. */
  warmup: number;
  duration: number;
  /** Seconds to wait at most for the machine to be quiet first. */
  waitQuiet: number;
}

export interface PhaseResult<S> {
  warmup: WrkResult | undefined;
  measured: WrkResult;
  /** % of one core per process group over the measured run. */
  cpu: Record<string, number>;
  mainThread: ThreadShare;
  samples: S | undefined;
}

/**
 * Warm-up, then the measured run. `during` starts sampling just before the measured run and gives
 * the function that stops it, whose result is the phase's `samples`.
 */
export async function loadPhase<S = undefined>(
  launcher: Launcher,
  settings: PhaseSettings,
  phase: {
    label: string;
    url: string;
    tokensFile: string;
    db: Db;
    groups: CpuGroups;
    /** The process whose JavaScript thread is watched. */
    mainPid: number;
    during?: () => Promise<() => Promise<S>>;
  },
): Promise<PhaseResult<S>> {
  const { label, url, tokensFile, db } = phase;
  // Our processes are idle here, so what the machine does now is someone else's.
  const quietUntil = Date.now() + settings.waitQuiet * 1000;
  let load = await machineLoad();
  while (load > 25 && Date.now() < quietUntil) load = await machineLoad();
  if (load > 25) say(`WARNING: other processes use ${fmt(load)}% of one core before the ${label} run`);
  let warmup: WrkResult | undefined;
  if (settings.warmup > 0) {
    say(`${label}: warm-up, ${settings.warmup} s`);
    warmup = await runWrk(launcher, settings.load, `${label}-warmup`, url, settings.warmup, tokensFile);
    say(`${label}: warm-up done: ${fmt(warmup.createdPerSecond)} created/s`);
  }
  // The database was created empty a few seconds ago: its planner statistics say so until
  // autovacuum's first round (a minute or more). A service that has run a while has had it.
  await sql`ANALYZE`.execute(db);
  launcher.check();
  say(`${label}: measuring, ${settings.duration} s`);
  const stopSampling = await phase.during?.();
  const cpu = await cpuWindow(phase.groups, db);
  const thread = mainThreadWindow(phase.mainPid);
  const measured = await runWrk(launcher, settings.load, label, url, settings.duration, tokensFile);
  const cpuUse = await cpu({ wrk: measured.cpuSeconds });
  const mainThread = thread();
  const samples = await stopSampling?.();
  launcher.check();
  return { warmup, measured, cpu: cpuUse, mainThread, samples };
}
