/**
 * `bun run start`: the whole service on one machine. Makes sure local Postgres and Redis are up
 * (starting installed-but-stopped local servers), migrates, then starts the processes in order,
 * each ready before the next, with prefixed readable logs (`[api-2]` when there are several of a
 * kind: API_PROCESSES, SEND_WORKERS, STATUS_WORKERS, FINALIZE_WORKERS, WEBHOOK_WORKERS). Ctrl-C / SIGTERM stops all of them.
 * Nothing it started outlives it: it stops everything when its own parent goes (a `bun run start`
 * killed outright), and each child stops when this script's IPC channel closes (src/lib/stop-with-parent.ts).
 */
import type { Subprocess } from "bun";
import { loadConfigOrExit, reachable } from "../src/config.ts";
import { createDb, ensureDatabase } from "../src/db/connect.ts";
import { migrate } from "../src/db/migrate.ts";
import { ensureServices, waitFor } from "./services.ts";

// A development tool: the public development defaults unless NODE_ENV says otherwise. Every child
// (simulator, workers, api) inherits it through process.env.
process.env.NODE_ENV ||= "development";
const config = loadConfigOrExit();
// The simulator refuses production (it signs webhooks with the real app secret); say what to do
// before anything starts.
if (config.isProduction && config.useSimulator) {
  console.error(
    "[start] NODE_ENV=production needs a real provider: set WHATSAPP_GRAPH_URL (e.g. https://graph.facebook.com); the built-in simulator is for development only",
  );
  process.exit(1);
}
const ROOT = new URL("..", import.meta.url).pathname;

function say(message: string) {
  console.log(`${new Date().toISOString().slice(11, 19)} [start] ${message}`);
}

/** JSON log lines become `12:00:01 [api] info request method=GET status=200 ...`; other lines pass. */
function formatLine(name: string, line: string): string {
  let text = line;
  try {
    const entry = JSON.parse(line);
    if (entry && typeof entry === "object" && "msg" in entry) {
      const { level, time, pid: _pid, name: _name, msg, hostname: _h, ...rest } = entry;
      const levelName =
        typeof level === "number"
          ? (
              { 10: "trace", 20: "debug", 30: "info", 40: "warn", 50: "error", 60: "fatal" } as Record<
                number,
                string
              >
            )[level]
          : level;
      const fields = Object.entries(rest).map(
        ([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`,
      );
      text = [levelName, msg, ...fields].join(" ");
      return `${String(time ?? new Date().toISOString()).slice(11, 19)} [${name}] ${text}`;
    }
  } catch {}
  return `${new Date().toISOString().slice(11, 19)} [${name}] ${text}`;
}

async function pipe(name: string, stream: ReadableStream<Uint8Array>, out: NodeJS.WriteStream) {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const chunk of stream) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline = buffered.indexOf("\n");
    while (newline >= 0) {
      out.write(`${formatLine(name, buffered.slice(0, newline))}\n`);
      buffered = buffered.slice(newline + 1);
      newline = buffered.indexOf("\n");
    }
  }
  if (buffered) out.write(`${formatLine(name, buffered)}\n`);
}

interface ProcessSpec {
  name: string;
  command: string[];
  /** Resolves when the process is ready to serve. */
  ready: () => Promise<boolean>;
  /** Messages the process sends over IPC (`process.send`). */
  onMessage?: (message: unknown) => void;
}

const httpOk = (url: string) => async () => {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(1000) })).ok;
  } catch {
    return false;
  }
};

/** `name`, or `name-1` ... `name-<count>` when there are several: the prefix of their log lines. */
function instances(name: string, count: number): string[] {
  return count === 1 ? [name] : Array.from({ length: count }, (_, i) => `${name}-${i + 1}`);
}

const WORKERS = [
  ["finalize", config.processes.finalize],
  ["status", config.processes.status],
  ["send", config.processes.send],
  ["webhook", config.processes.webhook],
  // One is enough: the template sync runs in one at a time, and the sweeper's nudges are idempotent.
  ["maintenance", 1],
] as const;

/**
 * An api process is ready when it says it listens (over IPC) and the port answers: with several on
 * one port (SO_REUSEPORT), the port answering does not say which one did.
 */
function apiProcess(name: string): ProcessSpec {
  let listening = false;
  return {
    name,
    command: ["bun", "src/server.ts"],
    onMessage: (message) => {
      if ((message as { listening?: unknown } | null)?.listening) listening = true;
    },
    ready: async () => listening && (await httpOk(`http://127.0.0.1:${config.port}/healthz`)()),
  };
}

/** In start order: the simulator, the workers (SEND_WORKERS, ... of each kind), then API_PROCESSES api processes. */
export const PROCESSES: ProcessSpec[] = [
  ...(config.useSimulator
    ? [
        {
          name: "simulator",
          command: ["bun", "src/simulator/server.ts"],
          ready: httpOk(`http://${reachable(config.simulatorHost)}:${config.simulatorPort}/_sim/health`),
        },
      ]
    : []),
  ...WORKERS.flatMap(([kind, count]) =>
    instances(kind, count).map((name) => ({
      name,
      command: ["bun", `workers/${kind}.ts`],
      // Workers serve no HTTP; one that is still running a second after start has connected (a bad
      // configuration or an unreachable database makes it exit at once, and that stops everything).
      ready: () => Bun.sleep(1000).then(() => !stopping),
    })),
  ),
  ...instances("api", config.processes.api).map(apiProcess),
];

const running: { name: string; proc: Subprocess }[] = [];
/** How often this script looks whether its parent is still there. */
const PARENT_CHECK_MS = 500;
let stopping = false;

async function stopAll(code: number) {
  if (stopping) return;
  stopping = true;
  say("stopping");
  for (const { proc } of [...running].reverse()) proc.kill("SIGTERM");
  const deadline = Bun.sleep(15_000).then(() => "timeout");
  const all = Promise.all(running.map(({ proc }) => proc.exited)).then(() => "done");
  if ((await Promise.race([all, deadline])) === "timeout") {
    for (const { proc } of running) proc.kill("SIGKILL");
  }
  say("stopped");
  process.exit(code);
}

process.on("SIGINT", () => void stopAll(0));
process.on("SIGTERM", () => void stopAll(0));
process.on("SIGHUP", () => void stopAll(0));

// `bun run start` passes SIGTERM on, but a process manager may SIGKILL it: then this script is
// handed to init (or a subreaper), and its parent pid changes.
const PARENT_PID = process.ppid;
setInterval(() => {
  if (process.ppid === PARENT_PID || stopping) return;
  say(`parent process ${PARENT_PID} is gone`);
  void stopAll(0);
}, PARENT_CHECK_MS).unref();

try {
  await ensureServices(config, say);
  await ensureDatabase(config.databaseUrl);
  const db = createDb(config.databaseUrl, { max: 1 });
  const applied = await migrate(db);
  await db.destroy();
  say(applied.length ? `migrations applied: ${applied.join(", ")}` : "database up to date");

  for (const spec of PROCESSES) {
    if (stopping) break;
    const proc = Bun.spawn(spec.command, {
      cwd: ROOT,
      stdout: "pipe",
      stderr: "pipe",
      env: process.env,
      // Every child has the channel: it stops when the channel closes, that is when this script dies.
      ipc: spec.onMessage ?? (() => {}),
    });
    running.push({ name: spec.name, proc });
    void pipe(spec.name, proc.stdout, process.stdout);
    void pipe(spec.name, proc.stderr, process.stderr);
    void proc.exited.then((code) => {
      if (!stopping) {
        say(`${spec.name} exited with code ${code}; stopping everything`);
        void stopAll(1);
      }
    });
    if (!(await waitFor(spec.ready, 30))) throw new Error(`${spec.name} did not become ready`);
    say(`${spec.name} is up`);
  }
  say(
    `ready: ${config.publicBaseUrl} (errors: ${config.publicBaseUrl}/docs, reference: ${config.publicBaseUrl}/reference)`,
  );
} catch (error) {
  console.error(`[start] ${(error as Error).message}`);
  await stopAll(1);
}
