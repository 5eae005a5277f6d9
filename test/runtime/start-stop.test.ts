import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import type { Subprocess } from "bun";
import { createTestEnv, eventually, freePort, type TestEnv } from "../support/index.ts";

/**
 * `bun run start` owns every process it starts (issue 42, item 14): however it is stopped, none of
 * them outlives it. A SIGTERM to the outermost `bun run` (a process manager, `timeout`), a SIGKILL
 * of it (start.ts then notices it was orphaned), a SIGKILL of start.ts itself (each child notices
 * its IPC channel closed): within seconds no process of the tree is left.
 */
let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(() => env.close());

/** Live processes by parent: /proc/<pid>/stat's fourth field, zombies left out. */
function childrenByParent(): Map<number, number[]> {
  const byParent = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
    const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (state === "Z") continue;
    const siblings = byParent.get(Number(ppid)) ?? [];
    siblings.push(Number(entry));
    byParent.set(Number(ppid), siblings);
  }
  return byParent;
}

/** `root` and every live process under it. */
function tree(root: number): number[] {
  const byParent = childrenByParent();
  const found: number[] = [];
  const visit = (pid: number) => {
    found.push(pid);
    for (const child of byParent.get(pid) ?? []) visit(child);
  };
  visit(root);
  return found;
}

function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0] !== "Z";
  } catch {
    return false;
  }
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
  } catch {
    return "";
  }
}

/** `bun run start` on free ports over the test's database and Redis prefix, once it says it is ready. */
async function startService(): Promise<{ outer: Subprocess; pids: number[] }> {
  const env_: Record<string, string | undefined> = {
    ...process.env,
    NODE_ENV: "development",
    PORT: String(await freePort()),
    SIMULATOR_PORT: String(await freePort()),
    DATABASE_URL: env.config.databaseUrl,
    REDIS_URL: env.config.redisUrl,
    REDIS_PREFIX: env.config.redisPrefix,
    LOG_LEVEL: "warn",
  };
  delete env_.WHATSAPP_GRAPH_URL;
  const outer = Bun.spawn(["bun", "run", "start"], {
    env: env_,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let output = "";
  void (async () => {
    for await (const chunk of outer.stdout) output += new TextDecoder().decode(chunk);
  })();
  void (async () => {
    for await (const chunk of outer.stderr) output += new TextDecoder().decode(chunk);
  })();
  await eventually(async () => output.includes("[start] ready"), 60_000).catch(() => {
    throw new Error(`bun run start did not become ready:\n${output}`);
  });
  const pids = tree(outer.pid);
  // bun run, scripts/start.ts, the simulator, five workers and the api.
  expect(pids.map(commandOf).filter((command) => /^bun /.test(command)).length).toBeGreaterThanOrEqual(9);
  return { outer, pids };
}

async function expectAllGone(pids: number[]) {
  try {
    await eventually(async () => pids.every((pid) => !alive(pid)), 20_000);
  } catch {
    const left = pids.filter(alive).map((pid) => `${pid} ${commandOf(pid)}`);
    expect(left).toEqual([]);
  } finally {
    for (const pid of pids.filter(alive)) process.kill(pid, "SIGKILL");
  }
}

const scriptPid = (pids: number[]) => {
  const pid = pids.find((candidate) => commandOf(candidate).includes("scripts/start.ts"));
  if (pid === undefined) throw new Error("no scripts/start.ts process");
  return pid;
};

describe("stopping bun run start", () => {
  test("SIGTERM to the outermost process stops every process it started", async () => {
    const { outer, pids } = await startService();
    outer.kill("SIGTERM");
    await expectAllGone(pids);
  }, 120_000);

  test("SIGKILL of the outermost process: start.ts sees its parent gone and stops everything", async () => {
    const { outer, pids } = await startService();
    outer.kill("SIGKILL");
    await expectAllGone(pids);
  }, 120_000);

  test("SIGKILL of scripts/start.ts: each child sees it gone and stops", async () => {
    const { outer, pids } = await startService();
    process.kill(scriptPid(pids), "SIGKILL");
    await expectAllGone(pids);
    outer.kill("SIGKILL");
  }, 120_000);
});
