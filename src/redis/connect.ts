import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Redis, type RedisOptions } from "ioredis";

/** Our Lua commands, registered with defineCommand on every connection we create. */
export interface ScriptCommands {
  /** See scripts/rate_limit.lua. */
  rateLimit(key: string, limit: number): Promise<[number, number, number, number, number]>;
  /** See scripts/send_admission.lua. */
  sendAdmission(
    rateKey: string,
    quotaKey: string,
    directoryVersionKey: string,
    idempotencyKey: string,
    limit: number,
    quota: number,
    quotaTtlSeconds: number,
    seed: number,
    directoryVersionTtlSeconds: number,
    claimTtlMs: number,
    claimMarker: string,
  ): Promise<[number, number, number, number, number, number, string, string | null]>;
  /** See scripts/attempt_window.lua. */
  attemptWindow(
    key: string,
    limit: number,
    windowSeconds: number,
    mode?: "peek",
  ): Promise<[number, number, number]>;
  /** See scripts/raise_feed_head.lua. */
  raiseFeedHead(key: string, epoch: number, lastSeq: number): Promise<number>;
  /** See scripts/take_send_tokens.lua. */
  takeSendTokens(
    key: string,
    rate: number,
    wanted: number,
    worthWaitingFor: number,
  ): Promise<[number, number]>;
}

export type RedisClient = Redis & ScriptCommands;

const SCRIPTS: { name: keyof ScriptCommands; file: string; keys: number }[] = [
  { name: "rateLimit", file: "rate_limit.lua", keys: 1 },
  { name: "sendAdmission", file: "send_admission.lua", keys: 4 },
  { name: "attemptWindow", file: "attempt_window.lua", keys: 1 },
  { name: "raiseFeedHead", file: "raise_feed_head.lua", keys: 1 },
  { name: "takeSendTokens", file: "take_send_tokens.lua", keys: 1 },
];

const SCRIPT_DIR = join(import.meta.dir, "scripts");
// Shared Lua (one definition of the fixed window), prepended to every script.
const SCRIPT_LIBRARY = readFileSync(join(SCRIPT_DIR, "lib", "fixed_window.lua"), "utf8");
const scriptSource = new Map(
  SCRIPTS.map((s) => [s.name, `${SCRIPT_LIBRARY}\n${readFileSync(join(SCRIPT_DIR, s.file), "utf8")}`]),
);

export interface RedisClientOptions {
  /** BullMQ's blocking connections need this to be null. */
  forQueues?: boolean;
  connectionName?: string;
}

export function createRedis(redisUrl: string, options: RedisClientOptions = {}): RedisClient {
  const settings: RedisOptions = {
    connectionName: options.connectionName,
    // While Redis is away a command waits for one reconnect attempt, then fails (the api answers
    // 503) instead of queueing forever; BullMQ's blocking connections must wait instead.
    maxRetriesPerRequest: options.forQueues ? null : 1,
    // A Redis that accepts connections but drops them (a restarting server, a proxy) would keep a
    // command waiting through reconnect after reconnect: bound it. Not for BullMQ's blocking reads.
    ...(options.forQueues ? {} : { commandTimeout: 2000 }),
    connectTimeout: 3000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2000),
    lazyConnect: false,
  };
  const redis = new Redis(redisUrl, settings) as RedisClient;
  // Errors surface on the commands that fail; an unhandled 'error' event would kill the process.
  redis.on("error", () => {});
  for (const script of SCRIPTS) {
    redis.defineCommand(script.name, { numberOfKeys: script.keys, lua: scriptSource.get(script.name) ?? "" });
  }
  return redis;
}

/**
 * Key names. Every key starts with REDIS_PREFIX and carries a {hash tag} naming the owner whose
 * keys must live in one Redis Cluster slot (a tenant's rate-limit and quota counters are touched
 * by one script call, so both are tagged with the tenant).
 */
export function redisKeys(prefix: string) {
  return {
    applicationRate: (tenantId: string, clientId: string, kind: "read" | "send") =>
      `${prefix}:{t:${tenantId}}:rate:${clientId}:${kind}`,
    clientRate: (clientId: string) => `${prefix}:{c:${clientId}}:rate:token`,
    ipRate: (ip: string, kind: "read" | "token" | "panel" | "ops") => `${prefix}:{ip:${ip}}:rate:${kind}`,
    /** Accepted sends of one tenant, channel and UTC day (YYYYMMDD). */
    dailyQuota: (tenantId: string, channel: string, day: string) =>
      `${prefix}:{t:${tenantId}}:quota:${channel}:${day}`,
    /**
     * Panel sign-in: attempts from one IP; failures against one account (its email, hashed: no PII
     * in keys); attempts from one IP against one account (cleared by a successful sign-in).
     */
    signInByIp: (ip: string) => `${prefix}:{ip:${ip}}:signin`,
    signInByAccount: (emailDigest: string) => `${prefix}:{signin:${emailDigest}}:signin`,
    signInByAccountAndIp: (emailDigest: string, ip: string) =>
      `${prefix}:{signin:${emailDigest}}:signin:ip:${ip}`,
    /** Failed client authentications at the token endpoint, and failed operator credentials, per IP. */
    tokenAuthFailures: (ip: string) => `${prefix}:{ip:${ip}}:token:auth-failures`,
    opsAuthFailures: (ip: string) => `${prefix}:{ip:${ip}}:ops:auth-failures`,
    /** A panel "new application" form already posted (a reload or double click creates nothing new). */
    panelNewApplicationForm: (tenantId: string, formId: string) =>
      `${prefix}:{t:${tenantId}}:panel:new-app:${formId}`,
    /**
     * The version of a tenant's senders and templates: set to a new value by every change of them
     * (src/senders/directory-version.ts), read by the send admission so that caches see a change at once.
     */
    directoryVersion: (tenantId: string) => `${prefix}:{t:${tenantId}}:directory-version`,
    /**
     * The primary's WAL position after an application's last accepted send (a sorted set of one
     * member, raised with ZADD GT): its reads wait for a replica to pass it (src/db/read-replica.ts).
     */
    writtenLsn: (tenantId: string, clientId: string) => `${prefix}:{t:${tenantId}}:written-lsn:${clientId}`,
    /** Idempotency fast path; the key itself is hashed (it is client-chosen, up to 255 chars). */
    idempotency: (tenantId: string, clientId: string, keyDigest: string) =>
      `${prefix}:{t:${tenantId}}:idem:${clientId}:${keyDigest}`,
    /**
     * Hash: message id -> the provider's id of a send the provider accepted but Postgres has not
     * recorded yet (src/outbound/send.ts); read before any retry sends again.
     */
    providerIdStash: () => `${prefix}:{outbound}:provider-ids`,
    /** A sender's token bucket (its messages per second), shared by every send worker. */
    sendTokens: (senderId: string) => `${prefix}:{s:${senderId}}:send-tokens`,
    /** A tenant's feed head "epoch:last_seq", raised by the sequencer after commit (src/feed/heads.ts). */
    feedHead: (tenantId: string) => `${prefix}:{t:${tenantId}}:feed:head`,
    /** The epoch every head was last synced from feed_heads with; short-lived, so syncs recur. */
    feedHeadsSynced: () => `${prefix}:{feed}:heads-synced`,
    /** A worker process's metrics snapshot (src/metrics/publish.ts), and the index of live snapshots. */
    workerMetrics: (worker: string, processId: string) => `${prefix}:{metrics}:worker:${worker}:${processId}`,
    workerMetricsIndex: () => `${prefix}:{metrics}:workers`,
  };
}
export type RedisKeys = ReturnType<typeof redisKeys>;

/**
 * Deletes every key of one instance (tests, benchmarks): ours are `prefix:...`, BullMQ's
 * `{prefix}:...` (the hash-tagged queue prefix, src/queues).
 */
export async function deleteInstanceKeys(redisUrl: string, prefix: string): Promise<void> {
  const redis = createRedis(redisUrl);
  try {
    for (const pattern of [`${prefix}:*`, `{${prefix}}:*`]) {
      let cursor = "0";
      do {
        const [next, keys] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
        cursor = next;
        if (keys.length > 0) await redis.del(...keys);
      } while (cursor !== "0");
    }
  } finally {
    redis.disconnect();
  }
}
