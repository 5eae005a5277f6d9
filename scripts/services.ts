/**
 * Local PostgreSQL and Redis for `bun run start` and `bun run test`: when a URL points at this
 * machine and nothing answers there, start the installed server; otherwise say clearly what is missing.
 */
import { existsSync, readdirSync } from "node:fs";
import { Redis } from "ioredis";
import pg from "pg";
import type { Config } from "../src/config.ts";

function isLocal(url: string) {
  return ["127.0.0.1", "localhost", "::1", "[::1]"].includes(new URL(url).hostname);
}

/** Whether `probe` completes without throwing. */
async function succeeds(probe: () => Promise<unknown>): Promise<boolean> {
  try {
    await probe();
    return true;
  } catch {
    return false;
  }
}

async function postgresAnswers(config: Config): Promise<boolean> {
  const url = new URL(config.databaseUrl);
  url.pathname = "/postgres";
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 2000 });
  return succeeds(async () => {
    await client.connect();
    await client.end();
  });
}

async function redisAnswers(config: Config): Promise<boolean> {
  const redis = new Redis(config.redisUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  redis.on("error", () => {});
  const answered = await succeeds(async () => {
    await redis.connect();
    await redis.ping();
  });
  redis.disconnect();
  return answered;
}

export async function waitFor(check: () => Promise<boolean>, seconds: number): Promise<boolean> {
  for (let i = 0; i < seconds * 4; i++) {
    if (await check()) return true;
    await Bun.sleep(250);
  }
  return false;
}

async function ensurePostgres(config: Config, say: (m: string) => void) {
  if (await postgresAnswers(config)) return;
  if (!isLocal(config.databaseUrl) || !Bun.which("pg_ctlcluster") || !existsSync("/etc/postgresql")) {
    throw new Error(
      `PostgreSQL does not answer at DATABASE_URL and cannot be started here. Install it (apt-get install postgresql) or set DATABASE_URL.`,
    );
  }
  const version = readdirSync("/etc/postgresql")[0];
  say(`PostgreSQL is not running; starting the local cluster ${version}/main`);
  Bun.spawnSync(["pg_ctlcluster", "--skip-systemctl-redirect", String(version), "main", "start"], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (!(await waitFor(() => postgresAnswers(config), 20))) throw new Error("PostgreSQL did not come up");
}

/** A local redis-server's arguments: on 127.0.0.1, nothing saved (Redis may restart empty). */
export function localRedisArgs(port: number | string, dir: string): string[] {
  return ["--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no", "--dir", dir];
}

async function ensureRedis(config: Config, say: (m: string) => void) {
  if (await redisAnswers(config)) return;
  if (!isLocal(config.redisUrl) || !Bun.which("redis-server")) {
    throw new Error(
      "Redis does not answer at REDIS_URL and cannot be started here. Install it (apt-get install redis-server) or set REDIS_URL.",
    );
  }
  say("Redis is not running; starting a local redis-server");
  const dir = existsSync("/var/lib/redis") ? "/var/lib/redis" : "/tmp";
  const port = new URL(config.redisUrl).port || "6379";
  Bun.spawnSync(["redis-server", "--daemonize", "yes", ...localRedisArgs(port, dir)], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (!(await waitFor(() => redisAnswers(config), 10))) throw new Error("Redis did not come up");
}

export async function ensureServices(config: Config, say: (message: string) => void): Promise<void> {
  await ensurePostgres(config, say);
  // A Redis Cluster (REDIS_CLUSTER_NODES) is the operator's to run; REDIS_URL is not used then.
  if (config.redisClusterNodes.length === 0) await ensureRedis(config, say);
}

/** Where the browser tests find Chromium (Debian's package; playwright-core drives it). */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** The panel's browser tests need Chromium: install Debian's package when it is missing. */
export async function ensureChromium(say: (message: string) => void): Promise<void> {
  if (existsSync(CHROMIUM_PATH)) return;
  await installDebianPackage("chromium", `Chromium is missing at ${CHROMIUM_PATH}`, "the browser tests", say);
}

/** bench/send.ts's load generator: wrk's path, Debian's package installed first when it is missing. */
export async function ensureWrk(say: (message: string) => void): Promise<string> {
  const found = Bun.which("wrk");
  if (found) return found;
  await installDebianPackage("wrk", "wrk is not installed", "the send benchmark", say);
  const installed = Bun.which("wrk");
  if (!installed) throw new Error("apt-get installed wrk, but it is not on the PATH");
  return installed;
}

/** `apt-get install <name>` as root (what a fresh Debian machine of this kind allows), else a clear error. */
async function installDebianPackage(
  name: string,
  missing: string,
  purpose: string,
  say: (message: string) => void,
): Promise<void> {
  if (!Bun.which("apt-get") || process.getuid?.() !== 0) {
    throw new Error(`${missing}; install it (apt-get install ${name}).`);
  }
  say(`installing ${name} for ${purpose} (apt-get install ${name})`);
  const install = () =>
    Bun.spawn(["apt-get", "install", "-y", "-q", name], {
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
      stdio: ["ignore", "ignore", "inherit"],
    }).exited;
  if ((await install()) !== 0) {
    // A fresh machine's package lists may be stale or empty.
    await Bun.spawn(["apt-get", "update", "-q"], { stdio: ["ignore", "ignore", "inherit"] }).exited;
    if ((await install()) !== 0) throw new Error(`apt-get install ${name} failed`);
  }
}
