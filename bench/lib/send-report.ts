/**
 * What bench/send.ts prints at the end: the figures of the baseline and the api, the per-send
 * counters, the drain report, and the verdict line against the throughput issues' targets.
 */
import { type CounterDeltas, describeCounters } from "./counters.ts";
import { describeCpu, describeThread } from "./cpu.ts";
import { fmt, ms } from "./format.ts";
import { describeMachineCosts, type MachineCosts } from "./machine-costs.ts";
import type { PhaseResult } from "./phase.ts";
import { describeProbes, type Probes } from "./probes.ts";
import type { SendOptions } from "./send-options.ts";
import { describeWrk } from "./wrk.ts";

/** What the api phase samples meanwhile (bench/send.ts). */
export interface ApiSamples {
  probes: Probes;
  counters: CounterDeltas;
}

/**
 * One line against issue 13's targets: drain wants >= 1,000 delivered/s, oldest unsent < 2 s, api
 * p99 < 250 ms, per message <= 0.5 Postgres transactions, <= 0.2 WAL fsyncs, <= 20 Redis commands
 * and <= 1.5 ms of CPU in api + workers + Postgres + Redis; accept wants >= 5,000/s and >= 12% of
 * the baseline with p99 < 50 ms and <= 4 Redis commands per send.
 *
 * With --batch (issue 23): accept wants >= 20,000 accepted messages/s; drain keeps issue 13's
 * delivery and per-message targets (per item) but does not judge the oldest unsent message (batches
 * accept faster than any drain delivers, so the backlog grows by design) nor the p99, which is a
 * whole call's; both are shown.
 */
export function verdict(
  opts: Pick<SendOptions, "mode" | "batch">,
  run: {
    measured: { createdPerSecond: number; latencyUs: { p99: number }; accepted: number };
    ratio: number;
    cpu: Record<string, number>;
    counters?: CounterDeltas;
    drained?: { handedPerSecond: number; maxOldestUnsentMs: number };
  },
): string {
  const accepted = run.measured.createdPerSecond;
  // The same denominator as the counters' lines: the sends of the measured window.
  const sends = run.measured.accepted || Number.NaN;
  const per = (n: number | undefined) => (n ?? Number.NaN) / sends;
  const redis = per(Object.values(run.counters?.redis ?? {}).reduce((a, b) => a + b, 0));
  const p99Ms = run.measured.latencyUs.p99 / 1000;
  const checks: [string, boolean][] = [];
  const check = (text: string, met: boolean) => checks.push([text, met]);
  const shown: string[] = [];
  const batched = opts.batch > 0;
  const mode = opts.mode;
  if (mode === "drain") {
    const handed = run.drained?.handedPerSecond ?? Number.NaN;
    const oldest = run.drained?.maxOldestUnsentMs ?? Number.NaN;
    const pg = run.counters?.postgres ?? {};
    const ownCpu = ["api", "send workers", "status worker", "postgres (bench db backends)", "redis"]
      .map((name) => run.cpu[name] ?? 0)
      .reduce((a, b) => a + b, 0);
    const cpuMs = (ownCpu * 10) / accepted;
    check(`delivered ${fmt(handed)}/s (>= 1,000)`, handed >= 1000);
    if (batched) {
      shown.push(
        `accepted ${fmt(accepted)} messages/s`,
        `oldest unsent ${fmt(oldest)} ms`,
        `p99 per call ${fmt(p99Ms)} ms`,
      );
    } else {
      check(`oldest unsent ${fmt(oldest)} ms (< 2,000)`, oldest < 2000);
      check(`api p99 ${fmt(p99Ms)} ms (< 250)`, p99Ms < 250);
    }
    check(
      `${fmt(per(pg.xact_commit), 2)} Postgres transactions/message (<= 0.5)`,
      per(pg.xact_commit) <= 0.5,
    );
    check(`${fmt(per(pg.wal_sync), 2)} WAL fsyncs/message (<= 0.2)`, per(pg.wal_sync) <= 0.2);
    check(`${fmt(redis, 1)} Redis commands/message (<= 20)`, redis <= 20);
    check(`${fmt(cpuMs, 2)} ms CPU/message in api+workers+Postgres+Redis (<= 1.5)`, cpuMs <= 1.5);
  } else if (batched) {
    check(`accepted ${fmt(accepted)} messages/s (>= 20,000)`, accepted >= 20_000);
    shown.push(
      `p99 per call of ${fmt(opts.batch)} ${fmt(p99Ms)} ms`,
      `${fmt(redis, 1)} Redis commands/message`,
    );
  } else {
    check(`accepted ${fmt(accepted)}/s (>= 5,000)`, accepted >= 5000);
    if (Number.isFinite(run.ratio))
      check(`${fmt(run.ratio * 100, 1)}% of the baseline (>= 12%)`, run.ratio >= 0.12);
    check(`p99 ${fmt(p99Ms)} ms (< 50)`, p99Ms < 50);
    check(`${fmt(redis, 1)} Redis commands/send (<= 4)`, redis <= 4);
  }
  const missed = checks.filter(([, met]) => !met).length;
  const targets = batched
    ? mode === "drain"
      ? `issue 13 drain targets, per message, batches of ${fmt(opts.batch)}`
      : `issue 23 target, batches of ${fmt(opts.batch)}`
    : "issue 13 targets";
  return `verdict (${targets}, ${mode}): ${missed === 0 ? "ALL MET" : `${missed} of ${checks.length} NOT met`}: ${checks
    .map(([text, met]) => `${text} ${met ? "met" : "NOT met"}`)
    .join("; ")}${shown.length > 0 ? `; not judged: ${shown.join(", ")}` : ""}`;
}

/** The figures of a run, printed once every process has done its part. */
export function printReport(
  opts: SendOptions,
  run: {
    /** What the kernel charged on this machine before the run (bench/lib/machine-costs.ts). */
    machine: MachineCosts;
    baseline: PhaseResult<undefined> | undefined;
    api: PhaseResult<ApiSamples>;
    ratio: number;
    /** Accept mode: the rows and the jobs once the requests in flight finished. */
    accepted?: { messagesAccepted: number; sendQueueWaiting: number | undefined };
    /** Drain mode: the report's lines and the figures the verdict judges. */
    drain?: { report: string[]; drained: { handedPerSecond: number; maxOldestUnsentMs: number } };
    /** With --profile: where the CPU profiles are. */
    profiles?: string;
    resultsFile: string;
  },
): void {
  const { baseline, api, ratio } = run;
  const measured = api.measured;
  const cores = navigator.hardwareConcurrency;
  const unit = opts.batch > 0 ? "message" : "send";
  console.log("");
  console.log(
    opts.batch > 0
      ? `== POST /v2/messages/batch of ${fmt(opts.batch)} sends, mode ${opts.mode}: wrk -t${opts.threads} -c${opts.connections}, ` +
          `${opts.warmup} s warm-up + ${opts.duration} s measured, ${opts.apps} applications, unique idempotency_keys per item ==`
      : `== POST /v2/messages, mode ${opts.mode}: wrk -t${opts.threads} -c${opts.connections}, ` +
          `${opts.warmup} s warm-up + ${opts.duration} s measured, ${opts.apps} applications, unique Idempotency-Keys ==`,
  );
  console.log(describeMachineCosts(run.machine));
  if (baseline) {
    console.log(
      `baseline (bench/baseline.ts, same schema, no I/O):\n    ${describeWrk(baseline.measured, opts.batch)}`,
    );
    console.log(`    CPU (% of one core, ${cores} cores): ${describeCpu(baseline.cpu, undefined, unit)}`);
    console.log(`    ${describeThread(baseline.mainThread)}`);
  }
  const processes = opts.apiProcesses > 1 ? `, ${opts.apiProcesses} processes on one port` : "";
  console.log(
    `api (bun ${opts.apiEntry}${processes}, LOG_LEVEL=warn):\n    ${describeWrk(measured, opts.batch)}`,
  );
  if (api.warmup) {
    console.log(
      `    warm-up: ${fmt(api.warmup.createdPerSecond)} created/s, statuses ${JSON.stringify(api.warmup.statuses)}`,
    );
  }
  console.log(
    `    CPU (% of one core, ${cores} cores): ${describeCpu(api.cpu, measured.createdPerSecond, unit)}`,
  );
  const first = opts.apiProcesses > 1 ? " (api-1's)" : "";
  console.log(`    ${describeThread(api.mainThread)}${first}`);
  if (api.samples) {
    console.log(`    ${describeProbes(api.samples.probes)}`);
    console.log(`    ${describeCounters(api.samples.counters, measured.accepted || Number.NaN)}`);
  }
  if (run.accepted)
    console.log(
      `    after the run: ${run.accepted.messagesAccepted} messages in Postgres, ${run.accepted.sendQueueWaiting} send jobs waiting in BullMQ (no workers)`,
    );
  for (const line of run.drain?.report ?? []) console.log(line);
  console.log(
    opts.batch > 0
      ? `accepted messages/s: ${fmt(measured.createdPerSecond)} (${fmt(measured.requestsPerSecond, 1)} calls/s of ${fmt(opts.batch)}); ` +
          `no baseline in batch mode; p99 per call ${ms(measured.latencyUs.p99)}`
      : `accepted sends/s: ${fmt(measured.createdPerSecond)}; baseline req/s: ${fmt(baseline?.measured.createdPerSecond ?? Number.NaN)}; ` +
          `ratio ${Number.isFinite(ratio) ? `${fmt(ratio * 100, 1)}%` : "-"}; p99 ${ms(measured.latencyUs.p99)}`,
  );
  console.log(
    verdict(opts, {
      measured,
      ratio,
      cpu: api.cpu,
      counters: api.samples?.counters,
      drained: run.drain?.drained,
    }),
  );
  for (const [name, cpu] of [
    ["baseline", baseline?.cpu],
    ["api", api.cpu],
  ] as const) {
    if ((cpu?.other ?? 0) > 25) {
      console.log(
        `WARNING: other processes used ${fmt(cpu?.other ?? 0)}% of one core during the ${name} run: its figures are too low; run again on a quiet machine (--wait-quiet)`,
      );
    }
  }
  if (run.profiles) console.log(run.profiles);
  console.log(`details: ${run.resultsFile}`);
}
