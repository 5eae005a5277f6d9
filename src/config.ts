/**
 * Configuration (DESIGN §2), read and validated once at start. A missing or malformed value stops
 * the process with one line naming the variable; nothing else in the code reads process.env.
 */

export const DEV_JWT_SECRET = "dev-only-jwt-secret-do-not-use-in-production";

export interface Config {
  nodeEnv: string;
  isProduction: boolean;
  port: number;
  publicBaseUrl: string;
  databaseUrl: string;
  redisUrl: string;
  redisPrefix: string;
  jwtSecret: string;
  /** Provider base URL without the Graph version, e.g. https://graph.facebook.com. */
  whatsappGraphUrl: string;
  /** True when WHATSAPP_GRAPH_URL was unset and the built-in simulator serves as provider. */
  useSimulator: boolean;
  whatsappAppSecret: string;
  whatsappVerifyToken: string;
  simulatorPort: number;
  /** Delay before the simulator posts each status webhook. */
  simulatorStatusDelayMs: number;
  dailySendQuota: number;
  logLevel: string;
  opsUser: string | undefined;
  opsPassword: string | undefined;
  /** Take the client IP from X-Forwarded-For (only behind a proxy you control). */
  trustProxy: boolean;
  /** How long the send path may use a tenant's cached senders and approved templates. */
  directoryCacheMs: number;
  /** Where the simulator posts its webhooks (default: this api's /webhooks/whatsapp). */
  simulatorWebhookUrl: string;
  /** The simulator posts each send's statuses in random order. */
  simulatorShuffleStatuses: boolean;
  /** Tuning of the worker processes (README, "Worker tuning"). */
  workers: WorkerTuning;
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
  /** When a killed worker's job is handed to another (BullMQ lock and stalled check). */
  lockMs: number;
  stalledIntervalMs: number;
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

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

export function loadConfig(env: Env = process.env): Config {
  const nodeEnv = env.NODE_ENV || "development";
  const isProduction = nodeEnv === "production";
  const port = integer(env, "PORT", 3000, 0, 65535);
  const simulatorPort = integer(env, "SIMULATOR_PORT", 3001, 0, 65535);

  const jwtSecret = env.JWT_SECRET || "";
  if (!jwtSecret && isProduction) throw new ConfigError("JWT_SECRET is required when NODE_ENV=production");
  if (jwtSecret && jwtSecret.length < 32) throw new ConfigError("JWT_SECRET must be at least 32 characters");

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

  // The dev values are public (README): in production they would let anyone forge webhooks.
  for (const name of ["WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN"]) {
    if (isProduction && !env[name]) throw new ConfigError(`${name} is required when NODE_ENV=production`);
  }

  const useSimulator = !env.WHATSAPP_GRAPH_URL;
  return {
    nodeEnv,
    isProduction,
    port,
    publicBaseUrl: url(env, "PUBLIC_BASE_URL", `http://localhost:${port}/v2`, ["http:", "https:"]),
    databaseUrl: url(env, "DATABASE_URL", "postgres://postgres@127.0.0.1:5432/messaging", [
      "postgres:",
      "postgresql:",
    ]),
    redisUrl: url(env, "REDIS_URL", "redis://127.0.0.1:6379/0", ["redis:", "rediss:"]),
    redisPrefix,
    jwtSecret: jwtSecret || DEV_JWT_SECRET,
    whatsappGraphUrl: url(env, "WHATSAPP_GRAPH_URL", `http://127.0.0.1:${simulatorPort}`, [
      "http:",
      "https:",
    ]),
    useSimulator,
    whatsappAppSecret: env.WHATSAPP_APP_SECRET || "dev-app-secret",
    whatsappVerifyToken: env.WHATSAPP_VERIFY_TOKEN || "dev-verify-token",
    simulatorPort,
    simulatorStatusDelayMs: integer(env, "SIMULATOR_STATUS_DELAY_MS", 200, 0, 600_000),
    dailySendQuota: integer(env, "DAILY_SEND_QUOTA", 10_000, 0, 1_000_000_000),
    logLevel,
    opsUser,
    opsPassword,
    trustProxy: env.TRUST_PROXY === "1" || env.TRUST_PROXY === "true",
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
      lockMs: integer(env, "WORKER_LOCK_MS", 30_000, 100, 3_600_000),
      stalledIntervalMs: integer(env, "WORKER_STALLED_INTERVAL_MS", 30_000, 100, 3_600_000),
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
