import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type ChainableCommander, Cluster, Redis, type RedisOptions } from "ioredis";
import type { Config } from "../config.ts";
import { type Logger, outageLog } from "../logger.ts";

/** Our Lua commands, registered with defineCommand on every connection we create. */
export interface ScriptCommands {
  /** See scripts/rate_limit.lua. */
  rateLimit(key: string, limit: number): Promise<[number, number, number, number, number]>;
  /**
   * See scripts/send_admission.lua: a batch of sends of one tenant and day. `keysThenArgs` is the
   * script's KEYS, then its ARGV; `numberOfKeys` says how many are KEYS (the script is defined
   * without a key count, which varies with the batch).
   */
  sendAdmission(numberOfKeys: number, ...keysThenArgs: (string | number)[]): Promise<SendAdmissionReply[]>;
  /** See scripts/attempt_window.lua. */
  attemptWindow(
    key: string,
    limit: number,
    windowSeconds: number,
    mode?: "peek",
  ): Promise<[number, number, number]>;
  /** See scripts/refund_quota.lua. */
  refundQuota(key: string, units?: number): Promise<number>;
  /** See scripts/reserve_quota.lua. */
  reserveQuota(
    quotaKey: string,
    directoryVersionKey: string,
    quota: number,
    quotaTtlSeconds: number,
    seed: number,
    directoryVersionTtlSeconds: number,
    wanted: number,
  ): Promise<[number, number, number, string]>;
  /** See scripts/release_claim.lua. */
  releaseClaim(key: string, token: string): Promise<number>;
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

/** One send's answer from scripts/send_admission.lua (see there). */
export type SendAdmissionReply = [number, number, number, number, number, number, string, string | null];

/** One node, or a Redis Cluster (REDIS_CLUSTER_NODES): the code is the same for both. */
export type RedisClient = (Redis | Cluster) & ScriptCommands;

/** Where Redis is: the Cluster of `redisClusterNodes` when any, else the one node at `redisUrl`. */
export type RedisTarget = Pick<Config, "redisUrl" | "redisClusterNodes">;

/** `keys`: how many KEYS a script takes; without it, each call passes its count first. */
const SCRIPTS: { name: keyof ScriptCommands; file: string; keys?: number }[] = [
  { name: "rateLimit", file: "rate_limit.lua", keys: 1 },
  { name: "sendAdmission", file: "send_admission.lua" },
  { name: "attemptWindow", file: "attempt_window.lua", keys: 1 },
  { name: "refundQuota", file: "refund_quota.lua", keys: 1 },
  { name: "reserveQuota", file: "reserve_quota.lua", keys: 2 },
  { name: "releaseClaim", file: "release_claim.lua", keys: 1 },
  { name: "raiseFeedHead", file: "raise_feed_head.lua", keys: 1 },
  { name: "takeSendTokens", file: "take_send_tokens.lua", keys: 1 },
];

const SCRIPT_DIR = join(import.meta.dir, "scripts");
// Shared Lua (one definition of the fixed window, one of the quota counter), prepended to every script.
const SCRIPT_LIBRARY = ["fixed_window.lua", "quota_counter.lua"]
  .map((file) => readFileSync(join(SCRIPT_DIR, "lib", file), "utf8"))
  .join("\n");
const scriptSource = new Map(
  SCRIPTS.map((s) => [s.name, `${SCRIPT_LIBRARY}\n${readFileSync(join(SCRIPT_DIR, s.file), "utf8")}`]),
);

export interface RedisClientOptions {
  /** BullMQ's blocking connections need this to be null. */
  forQueues?: boolean;
  connectionName?: string;
  /**
   * The process's logger: the connection's failures are written there once an outage
   * (watchConnection). Without one they surface only on the commands that fail.
   */
  logger?: Logger;
}

/** Errors a connection already reported (BullMQ hands them on as its Queue's and Worker's 'error'). */
const connectionErrors = new WeakSet<object>();

/**
 * Whether a connection's own 'error' event carried `error`: the outage log has it (once an outage),
 * so a Queue's or Worker's 'error' listener need not write it again (once a retry).
 */
export function reportedByConnection(error: unknown): boolean {
  return typeof error === "object" && error !== null && connectionErrors.has(error);
}

/**
 * Every 'error' of a connection is a failed (re)connect; an unhandled one would kill the process
 * (and ioredis prints it raw). With a logger, the process's outage log gets one line when its
 * first connection loses Redis and one when the last is back. The copies BullMQ makes of the
 * connection (a Worker's blocking and main connections) are watched the same way.
 */
function watchConnection<T extends Redis | Cluster>(connection: T, logger: Logger | undefined): T {
  const outages = logger && outageLog(logger);
  connection.on("error", (error: unknown) => {
    if (typeof error === "object" && error !== null) connectionErrors.add(error);
    outages?.down("redis", connection, error);
  });
  if (outages) {
    connection.on("ready", () => outages.up("redis", connection));
    connection.on("end", () => outages.closed("redis", connection));
  }
  const duplicate = connection.duplicate.bind(connection) as (...args: unknown[]) => T;
  (connection as unknown as { duplicate: (...args: unknown[]) => T }).duplicate = (...args) =>
    watchConnection(duplicate(...args), logger);
  return connection;
}

const COMMAND_TIMEOUT_MS = 2000;

/**
 * A Cluster holds a command while it has no connection to the cluster (at start, or all nodes away)
 * for as long as that lasts; the nodes' commandTimeout only starts once a node has it. Bound the
 * whole wait as a single node's commandTimeout does, so the api answers 503 rather than hang.
 */
function boundOfflineWait(cluster: Cluster): void {
  const send = cluster.sendCommand.bind(cluster);
  cluster.sendCommand = (command, stream, node) => {
    command.setTimeout(COMMAND_TIMEOUT_MS);
    return send(command, stream, node);
  };
}

/**
 * How a Cluster client follows a failover (ioredis 6, lib/cluster/index.ts and ConnectionPool.ts):
 * - no `clusterNodeRetryStrategy` (ioredis' default, null): the connection to a node that went away
 *   ends instead of reconnecting to it forever. Its commands fail as "connection closed", which the
 *   Cluster retries after `retryDelayOnFailover` with a fresh slot map (CLUSTER SLOTS from a node
 *   that answers), so they reach the promoted replica. With a retry strategy the dead node's
 *   connection never ended: commands with no retry limit (BullMQ's) waited on it for good, and
 *   those with one failed "max retries" without the map ever being refreshed.
 * - `slotsRefreshInterval`: ioredis 6 refreshes the map only on MOVED or a closed connection by
 *   default; every 2 s a client also learns of a promotion (and of a node that came back) while it
 *   is idle or its commands time out instead of closing.
 * A node that restarts with its slots is found again by that refresh, or by the MOVED a node sends.
 */
const CLUSTER_FAILOVER_OPTIONS = {
  slotsRefreshInterval: 2000,
  retryDelayOnFailover: 300,
  retryDelayOnClusterDown: 300,
  retryDelayOnTryAgain: 300,
} as const;

/** `target` may be a bare URL: that one node (tests and tools that need a particular server). */
export function createRedis(target: RedisTarget | string, options: RedisClientOptions = {}): RedisClient {
  const { redisUrl, redisClusterNodes } =
    typeof target === "string" ? { redisUrl: target, redisClusterNodes: [] } : target;
  const settings: RedisOptions = {
    connectionName: options.connectionName,
    // While Redis is away a command waits for one reconnect attempt, then fails (the api answers
    // 503) instead of queueing forever; BullMQ's blocking connections must wait instead.
    maxRetriesPerRequest: options.forQueues ? null : 1,
    // A Redis that accepts connections but drops them (a restarting server, a proxy) would keep a
    // command waiting through reconnect after reconnect: bound it. Not for BullMQ's blocking reads.
    ...(options.forQueues ? {} : { commandTimeout: COMMAND_TIMEOUT_MS }),
    connectTimeout: 3000,
    lazyConnect: false,
  };
  const retryStrategy = (attempt: number) => Math.min(attempt * 200, 2000);
  const redis = (
    redisClusterNodes.length > 0
      ? new Cluster(redisClusterNodes, {
          redisOptions: settings,
          clusterRetryStrategy: retryStrategy,
          slotsRefreshTimeout: 3000,
          ...CLUSTER_FAILOVER_OPTIONS,
        })
      : new Redis(redisUrl, { ...settings, retryStrategy })
  ) as RedisClient;
  if (redis instanceof Cluster && !options.forQueues) boundOfflineWait(redis);
  // Errors surface on the commands that fail; the outage log says when Redis went and came back.
  watchConnection(redis, options.logger);
  for (const script of SCRIPTS) {
    redis.defineCommand(script.name, { numberOfKeys: script.keys, lua: scriptSource.get(script.name) ?? "" });
  }
  return redis;
}

/** The part of a key Redis Cluster hashes to a slot: its first non-empty {hash tag}, else all of it. */
function hashTag(key: string): string {
  const open = key.indexOf("{");
  const close = open < 0 ? -1 : key.indexOf("}", open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : key;
}

/**
 * Pipelines one command per item and returns the replies in item order (as `pipeline.exec()` does,
 * [error, value] each). On one node that is one pipeline; a Cluster refuses a pipeline whose keys
 * are not all in one place, so there the items go in one pipeline per hash tag, sent together.
 * A lone item is sent as a plain command, its promise being what `add` returns: no Pipeline is
 * built for it (ioredis copies every script defined on the connection onto each one).
 */
export async function pipelinePerSlot<T>(
  redis: RedisClient,
  items: readonly T[],
  keyOf: (item: T) => string,
  add: (commands: ChainableCommander, item: T) => unknown,
): Promise<[Error | null, unknown][]> {
  if (items.length === 1) {
    const reply = add(redis as unknown as ChainableCommander, items[0] as T) as Promise<unknown>;
    return [
      await reply.then(
        (value): [null, unknown] => [null, value],
        (error: Error) => [error, null],
      ),
    ];
  }
  const groups = new Map<string, number[]>();
  items.forEach((item, i) => {
    const tag = redis.isCluster ? hashTag(keyOf(item)) : "";
    const group = groups.get(tag);
    if (group) group.push(i);
    else groups.set(tag, [i]);
  });
  const replies: [Error | null, unknown][] = new Array(items.length);
  await Promise.all(
    [...groups.values()].map(async (indexes) => {
      const pipeline = redis.pipeline();
      for (const i of indexes) add(pipeline, items[i] as T);
      const results = (await pipeline.exec()) ?? [];
      indexes.forEach((itemIndex, at) => {
        replies[itemIndex] = results[at] ?? [new Error("no reply"), null];
      });
    }),
  );
  return replies;
}

/**
 * Key names. Every key starts with REDIS_PREFIX and carries a {hash tag} naming the owner whose
 * keys must live in one Redis Cluster slot (a tenant's rate-limit and quota counters are touched
 * by one script call, so both are tagged with the tenant). Rate windows are `:window:` counters
 * (lib/fixed_window.lua); the `:rate:` hashes they replaced are never read again and expire in 2 s.
 */
export function redisKeys(prefix: string) {
  return {
    applicationRate: (tenantId: string, clientId: string, kind: "read" | "send") =>
      `${prefix}:{t:${tenantId}}:window:${clientId}:${kind}`,
    clientRate: (clientId: string) => `${prefix}:{c:${clientId}}:window:token`,
    ipRate: (ip: string, kind: "read" | "token" | "panel" | "ops") => `${prefix}:{ip:${ip}}:window:${kind}`,
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
     * recorded yet (src/outbound/stash.ts); read before any retry sends again.
     */
    providerIdStash: () => `${prefix}:{outbound}:provider-ids`,
    /** A sender's token bucket (its messages per second), shared by every send worker. */
    sendTokens: (senderId: string) => `${prefix}:{s:${senderId}}:send-tokens`,
    /** A tenant's feed head "epoch:last_seq", raised by the sequencer after commit (src/feed/heads.ts). */
    feedHead: (tenantId: string) => `${prefix}:{t:${tenantId}}:feed:head`,
    /** The epoch every head was last synced from feed_heads with; short-lived, so syncs recur. */
    feedHeadsSynced: () => `${prefix}:{feed}:heads-synced`,
    /** The last deliveries to a webhook endpoint, newest first (src/push/attempt-log.ts), for the panel. */
    webhookAttempts: (endpointId: string) => `${prefix}:{we:${endpointId}}:attempts`,
    /** A worker process's metrics snapshot (src/metrics/publish.ts), and the index of live snapshots. */
    workerMetrics: (worker: string, processId: string) => `${prefix}:{metrics}:worker:${worker}:${processId}`,
    workerMetricsIndex: () => `${prefix}:{metrics}:workers`,
  };
}
export type RedisKeys = ReturnType<typeof redisKeys>;

/** A Cluster knows its masters once it is ready (their list is empty before). */
export function clusterReady(cluster: Cluster): Promise<void> {
  if (cluster.status === "ready") return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("Redis Cluster not ready within 10 s")), 10_000);
    cluster.once("ready", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
