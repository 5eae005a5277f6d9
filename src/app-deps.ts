/**
 * The dependency types of the HTTP app and of the worker runtime: a leaf module (types only), so
 * that route plugins and services import what they are given without importing the app itself.
 */
import type { ChannelProvider } from "./channel/provider.ts";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import type { Db } from "./db/connect.ts";
import type { ReadDatabase } from "./db/read-replica.ts";
import type { TokenService } from "./http/request-state.ts";
import type { Logger } from "./logger.ts";
import type { Metrics } from "./metrics/index.ts";
import type { MetricsPublisher } from "./metrics/publish.ts";
import type { Queues } from "./queues/index.ts";
import type { RedisClient, RedisKeys } from "./redis/connect.ts";

/** Everything the HTTP app uses, built by the caller (server, tests) and passed in once. */
export interface AppDeps {
  config: Config;
  db: Db;
  /**
   * With DATABASE_READ_URL: where the reads of contacts, history, conversations and the feed run (a
   * replica, with read-your-writes per application). Unset, they run on `db` (`readWith`).
   */
  readDb?: ReadDatabase;
  redis: RedisClient;
  keys: RedisKeys;
  clock: Clock;
  logger: Logger;
  tokens: TokenService;
  queues: Queues;
  provider: ChannelProvider;
  /** This process's Prometheus metrics (src/metrics), in a registry of their own (buildDeps makes it). */
  metrics: Metrics;
  /**
   * Writes this process's metrics to Redis for the scrape of any api process (src/metrics/publish.ts):
   * at each scrape it answers, and every few seconds once started (src/server.ts).
   */
  metricsPublisher: MetricsPublisher;
  /**
   * How a webhook endpoint's host name is resolved to its addresses (src/push/url-safety.ts): the
   * system resolver unless a test gives one.
   */
  lookup?: (host: string) => Promise<string[]>;
  /**
   * Per-second limits that are not per application (those live on the application): per IP for
   * callers without a token, for the token endpoint (and per client_id: `token`), the panel and the
   * operator endpoints.
   */
  limits: { anonymous: number; token: number; tokenPerIp: number; panelPerIp: number; opsPerIp: number };
}
