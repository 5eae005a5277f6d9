/**
 * Names the JavaScript frames of a `perf record` of a Bun process. Bun (JavaScriptCore) run with
 * `BUN_JSC_useJITDump=1` writes a jitdump file per process (`/tmp/jit-<tid>-<pid>-<random>`), but
 * not under the name `perf inject --jit` looks for (`jit-<pid>.dump`), so perf shows its JIT code as
 * `[JIT] tid N`. This writes each dump's code loads as `/tmp/perf-<pid>.map`, the map `perf report`
 * and `perf script` read by themselves. Unlike `--profile` (which samples the JavaScript thread's wall
 * time, so time spent waiting for a CPU lands in whatever was running, mostly socket writes), perf
 * samples only time on a CPU, of every thread: the JIT compiler and the allocator's too.
 *
 *   BUN_JSC_useJITDump=1 bun bench/send.ts --mode drain ...   # in another shell, during the window:
 *   perf record -F 499 -g -p <pid> -o /tmp/api.perf -- sleep 10
 *   bun bench/jit-perf-map.ts /tmp/jit-*
 *   perf report -i /tmp/api.perf --sort comm,dso     # by thread, then --sort symbol
 *
 * The jitdump format: tools/perf/Documentation/jitdump-specification.txt in the Linux sources.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { exitOnHelp } from "./lib/usage.ts";

/** JIT_CODE_LOAD: a function's code, named, at an address. */
const CODE_LOAD = 0;
/** Where a JIT_CODE_LOAD record's name starts: id, size, timestamp, pid, tid, vma, address, size, index. */
const CODE_LOAD_NAME_AT = 56;

/** The code loads of one jitdump file as perf map lines (`<start hex> <size hex> <name>`). */
function mapLines(file: string): { pid: number; lines: string[] } {
  const bytes = readFileSync(file);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 40 || view.getUint32(0, true) !== 0x4a695444) {
    throw new Error(`${file}: not a jitdump file (no JiTD magic)`);
  }
  const pid = view.getUint32(20, true);
  const lines: string[] = [];
  let at = view.getUint32(8, true); // the header's size
  while (at + 16 <= bytes.length) {
    const id = view.getUint32(at, true);
    const size = view.getUint32(at + 4, true);
    if (size === 0 || at + size > bytes.length) break; // the process was still writing it
    if (id === CODE_LOAD) {
      const address = view.getBigUint64(at + 32, true);
      const codeSize = view.getBigUint64(at + 40, true);
      // The name ends at its NUL, within the record (the code bytes follow it).
      const nul = bytes.indexOf(0, at + CODE_LOAD_NAME_AT);
      const nameEnd = nul < 0 || nul > at + size ? at + size : nul;
      const name = bytes
        .subarray(at + CODE_LOAD_NAME_AT, nameEnd)
        .toString()
        .replace(/\s+/g, "_");
      lines.push(`${address.toString(16)} ${codeSize.toString(16)} ${name}`);
    }
    at += size;
  }
  return { pid, lines };
}

exitOnHelp(`bun bench/jit-perf-map.ts /tmp/jit-*.dump ...
  Writes each Bun jitdump's code loads as /tmp/perf-<pid>.map, for perf report and perf script
  (see this file's header for the whole recipe).`);

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: bun bench/jit-perf-map.ts /tmp/jit-*");
  process.exit(2);
}
for (const file of files) {
  const { pid, lines } = mapLines(file);
  writeFileSync(`/tmp/perf-${pid}.map`, `${lines.join("\n")}\n`);
  console.log(`/tmp/perf-${pid}.map: ${lines.length} functions (${file})`);
}
