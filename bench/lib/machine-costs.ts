/**
 * What this machine charges for the kernel work a message causes, measured before a run: figures
 * of CPU a message compare only between machines that charge alike. Machines of one kind have
 * differed threefold here (a 4 KB page fault 0.3 µs on one, 14 µs on another, under a
 * paravirtualized MMU), and a send costs the api, the workers and Postgres a few page faults and a
 * few dozen system calls each.
 */
import { closeSync, fstatSync, openSync } from "node:fs";

export interface MachineCosts {
  /** µs of one cheap system call (fstat), JavaScript's call overhead included. */
  syscallMicros: number;
  /** µs of one first touch of a fresh 4 KB page (a minor page fault). */
  pageFaultMicros: number;
  /** ns of one iteration of a plain JavaScript loop: the CPU's own speed. */
  loopNanos: number;
}

function micros(started: number): number {
  return (performance.now() - started) * 1000;
}

/** The median of five rounds of each, about a second in all. */
export function measureMachineCosts(): MachineCosts {
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const fd = openSync("/dev/null", "r");
  const syscall: number[] = [];
  const fault: number[] = [];
  const loop: number[] = [];
  try {
    for (let round = 0; round < 5; round++) {
      const calls = 20_000;
      let started = performance.now();
      for (let i = 0; i < calls; i++) fstatSync(fd);
      syscall.push(micros(started) / calls);

      // A fresh buffer this large is mapped lazily: each first write to a page faults it in.
      const pages = 4096;
      const bytes = new Uint8Array(pages * 4096);
      started = performance.now();
      for (let page = 0; page < pages; page++) bytes[page * 4096] = 1;
      fault.push(micros(started) / pages);

      const iterations = 20_000_000;
      let sum = 0;
      started = performance.now();
      for (let i = 0; i < iterations; i++) sum += i % 7;
      loop.push((micros(started) * 1000) / iterations + (sum < 0 ? 1 : 0));
    }
  } finally {
    closeSync(fd);
  }
  return { syscallMicros: median(syscall), pageFaultMicros: median(fault), loopNanos: median(loop) };
}

export function describeMachineCosts(costs: MachineCosts): string {
  return (
    `machine: ${costs.syscallMicros.toFixed(2)} µs a system call (fstat), ${costs.pageFaultMicros.toFixed(2)} µs a page fault, ` +
    `${costs.loopNanos.toFixed(2)} ns a loop iteration (compare CPU figures only between machines that charge alike)`
  );
}
