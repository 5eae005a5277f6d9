/**
 * Configuration (DESIGN §2), read and validated once at start. A missing or malformed value stops
 * the process with one line naming the variable; nothing else in the code reads process.env.
 */

import { deriveKey } from "./crypto/keys.ts";

/** The most feed shards (feed_shards' CHECK, sql/010_feed_shards.sql). */
export const FEED_SHARDS_MAX = 256;

export const DEV_JWT_SECRET = "dev-only-jwt-secret-do-not-use-in-production";

export interface Config {
  /** NODE_ENV as given ("" when unset). */
  nodeEnv: string;
  isProduction: boolean;
  /**
   * NODE_ENV=development, set explicitly: the only case where public development defaults apply
   * (JWT and webhook secrets, open /ops, cookies without Secure). Unset is not development.
   */
  isDevelopment: boolean;
  port: number;
  publicBaseUrl: string;
  databaseUrl: string;
  /** DATABASE_READ_URL: a streaming replica for the api's reads (src/db/read-replica.ts); unset: the primary. */
  databaseReadUrl: string | undefined;
  /** How long an application's reads keep waiting for a replica to pass its last write. */
  readYourWritesSeconds: number;
  redisUrl: string;
  /**
   * REDIS_CLUSTER_NODES: seed nodes of a Redis Cluster. When given, every Redis user connects to the
   * Cluster (src/redis/connect.ts) and REDIS_URL is not used.
   */
  redisClusterNodes: RedisNode[];
  redisPrefix: string;
  /** The service's root secret: the keys of tokens, feed cursors and CSRF are derived from it. */
  jwtSecret: string;
  /** Earlier root secrets (PREVIOUS_JWT_SECRETS), still accepted for verification after a rotation. */
  previousSecrets: string[];
  /** AES-256-GCM key of the senders' provider access tokens in Postgres (PROVIDER_TOKEN_KEY). */
  providerTokenKey: Buffer;
  /** Provider base URL without the Graph version, e.g. https://graph.facebook.com. */
  whatsappGraphUrl: string;
  /** True when WHATSAPP_GRAPH_URL was unset and the built-in simulator serves as provider. */
  useSimulator: boolean;
  whatsappAppSecret: string;
  whatsappVerifyToken: string;
  simulatorPort: number;
  /**
   * SIMULATOR_HOST: the address the simulator listens on, loopback by default. Anyone who reaches
   * it can have it post webhooks signed with the app secret (a STOP, say).
   */
  simulatorHost: string;
  /** Delay before the simulator posts each status webhook. */
  simulatorStatusDelayMs: number;
  /** How long the simulator retries a webhook the api did not take (backoff capped at a minute). */
  simulatorWebhookRetrySeconds: number;
  /** Sends per second the simulator accepts per phone number before answering 130429; 0: unlimited. */
  simulatorMps: number;
  /** Sends the simulator remembers (for /_sim/sent and /_sim/status); older ones are forgotten. */
  simulatorKeepSends: number;
  dailySendQuota: number;
  logLevel: string;
  opsUser: string | undefined;
  opsPassword: string | undefined;
  /** OPS_QUEUES_WRITE=1: the queue dashboard may retry, add, clean or delete jobs (else read-only). */
  opsQueuesWrite: boolean;
  /**
   * How many proxies of ours stand in front of the api: the client is the Nth address from the right
   * of X-Forwarded-For (0: the socket address, the header is ignored).
   */
  trustProxy: number;
  /** How long the send path may use a tenant's cached senders and approved templates. */
  directoryCacheMs: number;
  /** Where the simulator posts its webhooks (default: this api's /webhooks/whatsapp). */
  simulatorWebhookUrl: string;
  /** The simulator posts each send's statuses in random order. */
  simulatorShuffleStatuses: boolean;
  /** Tuning of the worker processes (README, "Worker tuning"). */
  workers: WorkerTuning;
  /** How many processes of each kind `bun run start` runs (scripts/start.ts). */
  processes: ProcessCounts;
  /** Push to integrators' webhook endpoints (DESIGN §12; src/push/). */
  webhooks: WebhookTuning;
}

export interface WebhookTuning {
  /**
   * `http` URLs and private, loopback or link-local addresses are accepted: NODE_ENV=development or
   * WEBHOOK_ALLOW_PRIVATE_URLS=1 (a receiver on this machine, tests). Otherwise https to public hosts only.
   */
  allowPrivateUrls: boolean;
  /** WEBHOOK_CONCURRENCY: endpoints one webhook worker process delivers to at once. */
  endpointsPerWorker: number;
  /** WEBHOOK_MAX_IN_FLIGHT: requests in flight to one endpoint at once (different contacts). */
  maxInFlight: number;
  /** WEBHOOK_TIMEOUT_MS: a delivery not answered within this failed (DESIGN §12: 10 s). */
  timeoutMs: number;
  /** WEBHOOK_RETRY_BASE_MS: the first retry's delay, doubling up to an hour (DESIGN §12: 5 s). */
  retryBaseMs: number;
}

export interface ProcessCounts {
  /** API_PROCESSES: api processes sharing PORT (SO_REUSEPORT). */
  api: number;
  /** SEND_WORKERS, STATUS_WORKERS, FINALIZE_WORKERS, WEBHOOK_WORKERS. */
  send: number;
  status: number;
  finalize: number;
  webhook: number;
}

export interface WorkerTuning {
  /** First retry delay of a retryable provider failure; exponential over SEND_ATTEMPTS. */
  sendRetryBaseMs: number;
  /** How long a send whose outcome is unknown waits for the provider's echo before re-sending. */
  sendInDoubtMs: number;
  sendConcurrency: number;
  sweepIntervalMs: number;
  /** Unfinished work younger than this is probably in flight; older, its nudge was lost. */
  sweepGraceSeconds: number;
  templateSyncIntervalMs: number;
  /** How often the maintenance worker removes what is past its retention (src/maintenance/retention.ts). */
  retentionIntervalMs: number;
  /** The width of a partition of the event log (src/events/partitions.ts): a day unless a test or soak rolls them faster. */
  eventPartitionIntervalMs: number;
  /** When a killed worker's job is handed to another (BullMQ lock and stalled check). */
  lockMs: number;
  stalledIntervalMs: number;
  /** FEED_SHARDS: the feed sequencer's shard count; raised in Postgres at start, never lowered. */
  feedShards: number;
}

export interface RedisNode {
  host: string;
  port: number;
}

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

function url(env: Env, name: string, fallback: string, protocols: string[]): string {
  const raw = env[name] || fallback;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be a URL, got ${JSON.stringify(raw)}`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(" or ")}, got ${JSON.stringify(raw)}`);
  }
  return raw.replace(/\/+$/, "");
}

/** REDIS_CLUSTER_NODES: `host:port,host:port,...` (an IPv6 host in brackets); unset or empty: none. */
function clusterNodes(env: Env): RedisNode[] {
  const raw = env.REDIS_CLUSTER_NODES ?? "";
  if (raw.trim() === "") return [];
  return raw.split(",").map((entry) => {
    const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/.exec(entry.trim());
    const port = Number(match?.[2]);
    if (!match?.[1] || port < 1 || port > 65535) {
      throw new ConfigError(
        `REDIS_CLUSTER_NODES must be comma-separated host:port pairs, got ${JSON.stringify(raw)}`,
      );
    }
    return { host: match[1].replace(/^\[(.*)\]$/, "$1"), port };
  });
}

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
const OPS_PASSWORD_MIN = 16;

function requiredOutsideDevelopment(name: string): string {
  return `${name} is required unless NODE_ENV=development`;
}

/** An address to listen on: an IP address or a host name (`0.0.0.0`: every interface). */
function listenHost(env: Env, name: string, fallback: string): string {
  const raw = env[name] || fallback;
  if (!/^[A-Za-z0-9_.:-]{1,253}$/.test(raw)) {
    throw new ConfigError(`${name} must be an IP address or host name, got ${JSON.stringify(raw)}`);
  }
  return raw;
}

/** Where a client on this machine reaches a server listening on `host` (in a URL). */
export function reachable(host: string): string {
  if (host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

/** TRUST_PROXY: how many proxies of ours are in front; "true"/"false" still mean 1/0. */
function proxyCount(env: Env): number {
  const raw = env.TRUST_PROXY;
  if (raw === "true") return 1;
  if (raw === "false") return 0;
  return integer(env, "TRUST_PROXY", 0, 0, 10);
}

/** PREVIOUS_JWT_SECRETS: comma-separated root secrets a rotation replaced, each as long as JWT_SECRET's minimum. */
function previousRootSecrets(env: Env): string[] {
  const secrets = (env.PREVIOUS_JWT_SECRETS ?? "")
    .split(",")
    .map((secret) => secret.trim())
    .filter(Boolean);
  if (secrets.some((secret) => secret.length < 32)) {
    throw new ConfigError(
      "PREVIOUS_JWT_SECRETS must be comma-separated secrets of at least 32 characters each",
    );
  }
  return secrets;
}

/** PROVIDER_TOKEN_KEY: 32 bytes, as 64 hex digits or base64. */
function tokenKey(env: Env, isDevelopment: boolean): Buffer {
  const raw = env.PROVIDER_TOKEN_KEY || "";
  if (!raw) {
    if (!isDevelopment) throw new ConfigError(requiredOutsideDevelopment("PROVIDER_TOKEN_KEY"));
    // Development only: a fixed key derived from the public dev secret, so every local process
    // (api, workers, CLI) reads what another wrote. It protects nothing.
    return deriveKey(DEV_JWT_SECRET, "provider-token");
  }
  const key = /^[0-9a-fA-F]{64}$/.test(raw)
    ? Buffer.from(raw, "hex")
    : /^[A-Za-z0-9+/_-]+={0,2}$/.test(raw)
      ? Buffer.from(raw, "base64")
      : Buffer.alloc(0);
  if (key.length !== 32) {
    throw new ConfigError(
      "PROVIDER_TOKEN_KEY must be 32 bytes, as 64 hex digits or base64 (openssl rand -hex 32)",
    );
  }
  return key;
}

export function loadConfig(env: Env = process.env): Config {
  const nodeEnv = env.NODE_ENV || "";
  const isProduction = nodeEnv === "production";
  // Secure unless told otherwise: a forgotten NODE_ENV must not turn the public defaults on.
  const isDevelopment = nodeEnv === "development";
  const port = integer(env, "PORT", 3000, 0, 65535);
  const simulatorPort = integer(env, "SIMULATOR_PORT", 3001, 0, 65535);
  const simulatorHost = listenHost(env, "SIMULATOR_HOST", "127.0.0.1");

  const jwtSecret = env.JWT_SECRET || "";
  if (!jwtSecret && !isDevelopment) throw new ConfigError(requiredOutsideDevelopment("JWT_SECRET"));
  if (jwtSecret && jwtSecret.length < 32) throw new ConfigError("JWT_SECRET must be at least 32 characters");
  const previousSecrets = previousRootSecrets(env);
  const providerTokenKey = tokenKey(env, isDevelopment);

  const redisPrefix = env.REDIS_PREFIX || "msg";
  if (!/^[A-Za-z0-9_.:-]{1,64}$/.test(redisPrefix)) {
    throw new ConfigError("REDIS_PREFIX must be 1-64 characters of A-Z a-z 0-9 _ . : -");
  }
  const logLevel = env.LOG_LEVEL || "info";
  if (!LOG_LEVELS.includes(logLevel))
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}`);

  const opsUser = env.OPS_USER || undefined;
  const opsPassword = env.OPS_PASSWORD || undefined;
  if (Boolean(opsUser) !== Boolean(opsPassword))
    throw new ConfigError("OPS_USER and OPS_PASSWORD go together");
  // In every NODE_ENV: the dashboard can retry, add and delete jobs.
  if (opsPassword && opsPassword.length < OPS_PASSWORD_MIN)
    throw new ConfigError(`OPS_PASSWORD must be at least ${OPS_PASSWORD_MIN} characters`);

  // The dev values are public (README): anywhere but a developer's machine they would let anyone
  // forge webhooks.
  for (const name of ["WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN"]) {
    if (!isDevelopment && !env[name]) throw new ConfigError(requiredOutsideDevelopment(name));
  }

  const useSimulator = !env.WHATSAPP_GRAPH_URL;
  return {
    nodeEnv,
    isProduction,
    isDevelopment,
    port,
    publicBaseUrl: url(env, "PUBLIC_BASE_URL", `http://localhost:${port}/v2`, ["http:", "https:"]),
    databaseUrl: url(env, "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/messaging", [
      "postgres:",
      "postgresql:",
    ]),
    databaseReadUrl: env.DATABASE_READ_URL
      ? url(env, "DATABASE_READ_URL", "", ["postgres:", "postgresql:"])
      : undefined,
    readYourWritesSeconds: integer(env, "READ_YOUR_WRITES_SECONDS", 300, 1, 86_400),
    redisUrl: url(env, "REDIS_URL", "redis://127.0.0.1:6379/0", ["redis:", "rediss:"]),
    redisClusterNodes: clusterNodes(env),
    redisPrefix,
    jwtSecret: jwtSecret || DEV_JWT_SECRET,
    previousSecrets,
    providerTokenKey,
    whatsappGraphUrl: url(env, "WHATSAPP_GRAPH_URL", `http://${reachable(simulatorHost)}:${simulatorPort}`, [
      "http:",
      "https:",
    ]),
    useSimulator,
    whatsappAppSecret: env.WHATSAPP_APP_SECRET || "dev-app-secret",
    whatsappVerifyToken: env.WHATSAPP_VERIFY_TOKEN || "dev-verify-token",
    simulatorPort,
    simulatorHost,
    simulatorStatusDelayMs: integer(env, "SIMULATOR_STATUS_DELAY_MS", 200, 0, 600_000),
    simulatorWebhookRetrySeconds: integer(env, "SIMULATOR_WEBHOOK_RETRY_SECONDS", 3600, 0, 7 * 86_400),
    simulatorMps: integer(env, "SIMULATOR_MPS", 0, 0, 1_000_000),
    simulatorKeepSends: integer(env, "SIMULATOR_KEEP_SENDS", 100_000, 100, 100_000_000),
    dailySendQuota: integer(env, "DAILY_SEND_QUOTA", 10_000, 0, 1_000_000_000),
    logLevel,
    opsUser,
    opsPassword,
    opsQueuesWrite: env.OPS_QUEUES_WRITE === "1",
    trustProxy: proxyCount(env),
    directoryCacheMs: integer(env, "DIRECTORY_CACHE_MS", 3000, 0, 60_000),
    simulatorWebhookUrl: url(env, "SIMULATOR_WEBHOOK_URL", `http://127.0.0.1:${port}/webhooks/whatsapp`, [
      "http:",
      "https:",
    ]),
    simulatorShuffleStatuses: env.SIMULATOR_SHUFFLE_STATUSES === "1",
    workers: {
      sendRetryBaseMs: integer(env, "SEND_RETRY_BASE_MS", 2000, 1, 3_600_000),
      sendInDoubtMs: integer(env, "SEND_IN_DOUBT_MS", 60_000, 0, 86_400_000),
      sendConcurrency: integer(env, "SEND_CONCURRENCY", 20, 1, 1000),
      sweepIntervalMs: integer(env, "SWEEP_INTERVAL_MS", 5000, 10, 3_600_000),
      sweepGraceSeconds: integer(env, "SWEEP_GRACE_SECONDS", 10, 0, 86_400),
      templateSyncIntervalMs: integer(env, "TEMPLATE_SYNC_INTERVAL_MS", 600_000, 1000, 86_400_000),
      retentionIntervalMs: integer(env, "RETENTION_INTERVAL_MS", 60_000, 100, 86_400_000),
      eventPartitionIntervalMs: integer(
        env,
        "EVENT_PARTITION_INTERVAL_MS",
        86_400_000,
        60_000,
        30 * 86_400_000,
      ),
      lockMs: integer(env, "WORKER_LOCK_MS", 30_000, 100, 3_600_000),
      stalledIntervalMs: integer(env, "WORKER_STALLED_INTERVAL_MS", 30_000, 100, 3_600_000),
      feedShards: integer(env, "FEED_SHARDS", 1, 1, FEED_SHARDS_MAX),
    },
    processes: {
      api: integer(env, "API_PROCESSES", 1, 1, 64),
      send: integer(env, "SEND_WORKERS", 1, 1, 64),
      status: integer(env, "STATUS_WORKERS", 1, 1, 64),
      finalize: integer(env, "FINALIZE_WORKERS", 1, 1, 64),
      webhook: integer(env, "WEBHOOK_WORKERS", 1, 1, 64),
    },
    webhooks: {
      allowPrivateUrls: isDevelopment || env.WEBHOOK_ALLOW_PRIVATE_URLS === "1",
      endpointsPerWorker: integer(env, "WEBHOOK_CONCURRENCY", 50, 1, 1000),
      maxInFlight: integer(env, "WEBHOOK_MAX_IN_FLIGHT", 200, 1, 1000),
      timeoutMs: integer(env, "WEBHOOK_TIMEOUT_MS", 10_000, 100, 60_000),
      retryBaseMs: integer(env, "WEBHOOK_RETRY_BASE_MS", 5000, 10, 3_600_000),
    },
  };
}

/** For process entrypoints: one clear line and exit 1 on a bad value. */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`configuration error: ${error.message}`);
      process.exit(1);
    }
    throw error;
  }
}
