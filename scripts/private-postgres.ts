/**
 * A private Postgres server in a temporary folder, on a port of its own (bench/faults.ts, the read
 * replica test): initdb, or pg_basebackup of another one as a streaming standby, then pg_ctl to
 * start and stop it. Never the shared server. Debian's initdb and pg_ctl refuse root, so when we
 * are root they run as the `postgres` user (or `faultspg`, created for it when there is none).
 */
import { chmodSync, chownSync, closeSync, mkdirSync, openSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";

export interface PgTools {
  /** The folder of initdb, pg_ctl, pg_basebackup. */
  bin: string;
  /** Who runs them (when we are root); undefined: ourselves. */
  user: string | undefined;
}

/** The server binaries and who may run them, or why there are none here. */
export function findPgTools(): PgTools | { problem: string } {
  const bin = newestDebianBin() ?? Bun.which("initdb")?.replace(/\/initdb$/, "");
  if (!bin) return { problem: "initdb not found (Debian: /usr/lib/postgresql/<version>/bin)" };
  if (process.getuid?.() !== 0) return { bin, user: undefined };
  const exists = (name: string) => Bun.spawnSync(["id", "-u", name]).exitCode === 0;
  if (exists("postgres")) return { bin, user: "postgres" };
  if (!exists("faultspg")) {
    const made = Bun.spawnSync([
      "useradd",
      "--system",
      "--no-create-home",
      "--shell",
      "/usr/sbin/nologin",
      "faultspg",
    ]);
    if (made.exitCode !== 0)
      return { problem: `could not create the user faultspg: ${made.stderr.toString()}` };
  }
  return { bin, user: "faultspg" };
}

function newestDebianBin(): string | undefined {
  const base = "/usr/lib/postgresql";
  try {
    const newest = readdirSync(base)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a))[0];
    return newest ? join(base, newest, "bin") : undefined;
  } catch {
    return undefined;
  }
}

export function freePort(): number {
  // The api and the simulator bind 0.0.0.0, so the port must be free there.
  const listener = Bun.listen({ hostname: "0.0.0.0", port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

export interface PrivatePostgresOptions {
  tools: PgTools;
  /** A folder to create (its parent exists): the data directory, socket and server log go in it. */
  home: string;
  port: number;
  /** Server settings (`name=value`) besides port, address and socket folder. */
  settings?: string[];
  /** Where the output of initdb, pg_basebackup and pg_ctl goes. */
  commandLog: string;
}

export interface PrivatePostgres {
  readonly port: number;
  readonly running: boolean;
  url(database: string): string;
  /** A new cluster (superuser `postgres`, trust, replication allowed from 127.0.0.1). */
  init(): Promise<void>;
  /** A copy of a running cluster that streams from it (`pg_basebackup -R`): a hot standby. */
  standbyOf(primary: PrivatePostgres): Promise<void>;
  start(): Promise<void>;
  stop(mode?: "fast" | "immediate"): Promise<void>;
}

export function privatePostgres(options: PrivatePostgresOptions): PrivatePostgres {
  const { tools, home, port, commandLog } = options;
  const data = join(home, "data");
  const as = (cmd: string[]) => (tools.user ? ["runuser", "-u", tools.user, "--", ...cmd] : cmd);
  let running = false;

  async function run(cmd: string[], what: string): Promise<void> {
    const log = openSync(commandLog, "a");
    const proc = Bun.spawn(as(cmd), { stdin: "ignore", stdout: log, stderr: log });
    closeSync(log);
    const code = await proc.exited;
    if (code !== 0) throw new Error(`${what} failed with code ${code} (see ${commandLog})`);
  }

  function makeHome(): void {
    mkdirSync(home);
    if (!tools.user) return;
    const uid = Number(Bun.spawnSync(["id", "-u", tools.user]).stdout.toString());
    const gid = Number(Bun.spawnSync(["id", "-g", tools.user]).stdout.toString());
    // A temporary folder is ours alone (0700): the server's user must reach its home in it.
    chmodSync(dirname(home), 0o755);
    chownSync(home, uid, gid);
  }

  return {
    port,
    get running() {
      return running;
    },
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async init() {
      makeHome();
      // initdb's pg_hba.conf trusts local and 127.0.0.1 connections, replication ones included.
      await run(
        [join(tools.bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"],
        "initdb",
      );
    },
    async standbyOf(primary) {
      makeHome();
      await run(
        [
          join(tools.bin, "pg_basebackup"),
          ...["-h", "127.0.0.1", "-p", String(primary.port), "-U", "postgres", "-D", data],
          ...["-R", "-X", "stream", "--checkpoint=fast", "--no-sync"],
        ],
        "pg_basebackup",
      );
    },
    async start() {
      const settings = [
        `port=${port}`,
        "listen_addresses=127.0.0.1",
        `unix_socket_directories=${home}`,
        ...(options.settings ?? []),
      ];
      await run(
        [
          join(tools.bin, "pg_ctl"),
          ...["-D", data, "-l", join(home, "postgres.log"), "-w", "-t", "60"],
          ...["-o", settings.map((setting) => `-c ${setting}`).join(" "), "start"],
        ],
        "pg_ctl start",
      );
      running = true;
    },
    async stop(mode = "fast") {
      await run([join(tools.bin, "pg_ctl"), "-D", data, "-m", mode, "-w", "-t", "60", "stop"], "pg_ctl stop");
      running = false;
    },
  };
}
