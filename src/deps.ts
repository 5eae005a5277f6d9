import type { AppDeps } from "./app-deps.ts";
import { createWhatsAppProvider } from "./channel/whatsapp.ts";
import { type Clock, systemClock } from "./clock.ts";
import type { Config } from "./config.ts";
import { createDb, type DbOptions } from "./db/connect.ts";
import { replicaReads } from "./db/read-replica.ts";
import { DEFAULT_LIMITS, IP_LIMITS } from "./http/rate-limit.ts";
import { createLogger, type Logger } from "./logger.ts";
import { createMetrics } from "./metrics/index.ts";
import { instrumentProvider } from "./metrics/provider.ts";
import { createMetricsPublisher } from "./metrics/publish.ts";
import { createTokenService } from "./oauth/tokens.ts";
import { createQueues } from "./queues/index.ts";
import { createRedis, redisKeys } from "./redis/connect.ts";

/** Builds the dependencies from configuration; callers may swap the clock, logger or limits. */
export function buildDeps(
  config: Config,
  overrides: {
    clock?: Clock;
    logger?: Logger;
    limits?: Partial<AppDeps["limits"]>;
    db?: DbOptions;
  } = {},
): AppDeps {
  const clock = overrides.clock ?? systemClock;
  const metrics = createMetrics({ process: "api" });
  const logger = overrides.logger ?? createLogger(config.logLevel, "api");
  // The connections log a dependency's outage once, to the process's logger.
  const redis = createRedis(config, { connectionName: "messaging-api", logger });
  const db = createDb(config.databaseUrl, { applicationName: "messaging-api", logger, ...overrides.db });
  const keys = redisKeys(config.redisPrefix);
  return {
    config,
    db,
    readDb: config.databaseReadUrl
      ? replicaReads({
          primary: db,
          // A replica that does not answer holds a read a second at most, then the primary answers it.
          replica: createDb(config.databaseReadUrl, {
            applicationName: "messaging-api-read",
            logger,
            ...overrides.db,
            connectionTimeoutMillis: 1000,
          }),
          redis,
          keys,
          logger,
          metrics,
          readYourWritesSeconds: config.readYourWritesSeconds,
        })
      : undefined,
    redis,
    queues: createQueues(config, config.redisPrefix, { connectionName: "messaging-api-queues", logger }),
    provider: instrumentProvider(createWhatsAppProvider({ baseUrl: config.whatsappGraphUrl }), metrics),
    metrics,
    metricsPublisher: createMetricsPublisher({ redis, keys, metrics, logger }),
    keys,
    clock,
    logger,
    tokens: createTokenService(config.jwtSecret, clock, config.previousSecrets),
    limits: {
      anonymous: DEFAULT_LIMITS.read,
      token: DEFAULT_LIMITS.token,
      tokenPerIp: IP_LIMITS.token,
      panelPerIp: IP_LIMITS.panel,
      opsPerIp: IP_LIMITS.ops,
      ...overrides.limits,
    },
  };
}

export async function closeDeps(deps: AppDeps): Promise<void> {
  await deps.metricsPublisher.stop();
  await deps.queues.close();
  await Promise.allSettled([deps.db.destroy(), deps.readDb?.close(), deps.redis.quit()]);
}
