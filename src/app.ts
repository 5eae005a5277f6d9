import { Elysia } from "elysia";
import type { ChannelProvider } from "./channel/provider.ts";
import type { Clock } from "./clock.ts";
import type { Config } from "./config.ts";
import { contactRoutes } from "./contacts/routes.ts";
import { conversationRoutes } from "./conversations/routes.ts";
import type { Db } from "./db/connect.ts";
import type { DocumentedRoute } from "./docs/openapi.ts";
import { apiReferenceRoutes, REFERENCE_STATIC_PATHS } from "./docs/reference.ts";
import { docsRoutes } from "./docs/routes.ts";
import { feedRoutes } from "./feed/routes.ts";
import { healthRoutes } from "./health/routes.ts";
import { historyRoutes } from "./history/routes.ts";
import { API_PREFIX, MEDIA_BODY_LIMIT, requestPipeline } from "./http/pipeline.ts";
import type { Logger } from "./logger.ts";
import { mediaRoutes } from "./media/routes.ts";
import { createMessageAcceptor } from "./messages/accept.ts";
import { createSendAdmission, type OutboundSending } from "./messages/admission.ts";
import { messageRoutes } from "./messages/routes.ts";
import type { Metrics } from "./metrics/index.ts";
import { oauthRoutes } from "./oauth/routes.ts";
import type { TokenService } from "./oauth/tokens.ts";
import { opsRoutes } from "./ops/routes.ts";
import { panelErrorResponse } from "./panel/errors.ts";
import { PANEL_PREFIX } from "./panel/paths.ts";
import { panelRoutes } from "./panel/routes.ts";
import type { Queues } from "./queues/index.ts";
import type { RedisClient, RedisKeys } from "./redis/connect.ts";
import { senderRoutes } from "./senders/routes.ts";
import { webhookRoutes } from "./webhooks/routes.ts";

/** Everything the HTTP app uses, built by the caller (server, tests) and passed in once. */
export interface AppDeps {
  config: Config;
  db: Db;
  redis: RedisClient;
  keys: RedisKeys;
  clock: Clock;
  logger: Logger;
  tokens: TokenService;
  queues: Queues;
  provider: ChannelProvider;
  /** This process's Prometheus metrics (src/metrics), in a registry of their own (buildDeps makes it). */
  metrics: Metrics;
  /** Per-second limits that are not per application (those live on the application). */
  limits: { anonymous: number; token: number };
}

export function createApp(deps: AppDeps) {
  // One send path per process, shared by POST /v2/messages and the panel's replies: one group
  // commit, one set of directory and quota caches.
  const sending: OutboundSending = {
    admitSend: createSendAdmission({ ...deps, defaultDailyQuota: deps.config.dailySendQuota }),
    acceptOutboundMessage: createMessageAcceptor(deps),
  };
  // Every route of the finished app, read on request: openapi.json documents them, and the pipeline
  // answers 405 (with Allow) and labels metrics from them.
  const routes = (): readonly DocumentedRoute[] => app.routes;
  const api = new Elysia({ prefix: API_PREFIX })
    .use(apiReferenceRoutes(deps, routes))
    .use(oauthRoutes(deps))
    .use(senderRoutes(deps))
    .use(messageRoutes(deps, sending.acceptOutboundMessage))
    .use(contactRoutes(deps))
    .use(historyRoutes(deps))
    .use(conversationRoutes(deps))
    .use(feedRoutes(deps))
    .use(docsRoutes(deps))
    .use(mediaRoutes(deps));

  const app = new Elysia({
    // Closed schemas reject unknown fields instead of silently dropping them.
    normalize: false,
    serve: { maxRequestBodySize: MEDIA_BODY_LIMIT * 2 },
  })
    .decorate("deps", deps)
    .use(
      requestPipeline(
        {
          publicBaseUrl: deps.config.publicBaseUrl,
          trustProxy: deps.config.trustProxy,
          redis: deps.redis,
          keys: deps.keys,
          tokens: deps.tokens,
          logger: deps.logger,
          metrics: deps.metrics,
          anonymousLimit: deps.limits.anonymous,
          admitSend: sending.admitSend,
          staticPaths: REFERENCE_STATIC_PATHS,
          pageErrors: { prefix: PANEL_PREFIX, render: panelErrorResponse },
        },
        routes,
      ),
    )
    .use(healthRoutes(deps))
    .use(webhookRoutes(deps))
    .use(opsRoutes(deps))
    .use(panelRoutes(deps, sending))
    .use(api);
  return app;
}

export type App = ReturnType<typeof createApp>;
