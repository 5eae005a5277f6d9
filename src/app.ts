import { Elysia } from "elysia";
import type { AppDeps } from "./app-deps.ts";
import { contactRoutes } from "./contacts/routes.ts";
import { conversationRoutes } from "./conversations/routes.ts";
import type { DocumentedRoute } from "./docs/openapi.ts";
import { apiReferenceRoutes } from "./docs/reference.ts";
import { docsRoutes } from "./docs/routes.ts";
import { eventRoutes } from "./events/routes.ts";
import { feedRoutes } from "./feed/routes.ts";
import { healthRoutes } from "./health/routes.ts";
import { historyRoutes } from "./history/routes.ts";
import { MEDIA_BODY_LIMIT } from "./http/body.ts";
import { API_PREFIX, ROUTER_STANDARD_HOSTNAME } from "./http/paths.ts";
import { mediaRoutes } from "./media/routes.ts";
import { createMessageAcceptor } from "./messages/accept.ts";
import { createQuotaReservation, createSendAdmission, outboundSending } from "./messages/admission.ts";
import { messageCancelRoutes } from "./messages/cancel.ts";
import { messageLookupRoutes } from "./messages/lookup.ts";
import { messageRoutes } from "./messages/routes.ts";
import { oauthMetadataRoutes } from "./oauth/metadata.ts";
import { oauthRoutes } from "./oauth/routes.ts";
import { opsRoutes } from "./ops/routes.ts";
import { panelErrorResponse } from "./panel/errors.ts";
import { PANEL_PREFIX } from "./panel/paths.ts";
import { panelRoutes } from "./panel/routes.ts";
import { assertEveryRouteHasPolicy, requestPipeline } from "./pipeline/request-pipeline.ts";
import { webhookEndpointRoutes } from "./push/routes.ts";
import { senderRoutes } from "./senders/routes.ts";
import { webhookRoutes } from "./webhooks/routes.ts";

export function createApp(deps: AppDeps) {
  // One send path per process, shared by POST /v2/messages and the panel's replies: one group
  // commit, one set of directory and quota caches.
  const quota = { ...deps, defaultDailyQuota: deps.config.dailySendQuota };
  const sending = outboundSending(createSendAdmission(quota), createMessageAcceptor(deps), {
    ...deps,
    reserveQuota: createQuotaReservation(quota),
  });
  // Every route of the finished app, read on request: openapi.json documents them, and the pipeline
  // answers 405 (with Allow) and labels metrics from them.
  const routes = (): readonly DocumentedRoute[] => app.routes;
  const api = new Elysia({ prefix: API_PREFIX })
    .use(apiReferenceRoutes(deps, routes))
    .use(oauthRoutes(deps))
    .use(senderRoutes(deps))
    .use(messageRoutes(sending, deps.config.publicBaseUrl))
    .use(messageLookupRoutes(deps))
    .use(messageCancelRoutes(deps))
    .use(contactRoutes(deps))
    .use(historyRoutes(deps))
    .use(conversationRoutes(deps))
    .use(feedRoutes(deps))
    .use(eventRoutes(deps))
    .use(webhookEndpointRoutes(deps))
    .use(docsRoutes(deps))
    .use(mediaRoutes(deps));

  const app = new Elysia({
    // Closed schemas reject unknown fields instead of silently dropping them.
    normalize: false,
    // The router reads the path right after `http://` whatever the Host (src/http/paths.ts).
    handler: { standardHostname: ROUTER_STANDARD_HOSTNAME },
    // Each route's cap is the pipeline's (src/http/body.ts), which answers in the envelope; Bun's own
    // cap (a bare 413) sits above the largest so that it never answers first.
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
          ipLimits: {
            anonymous: deps.limits.anonymous,
            token: deps.limits.tokenPerIp,
            panel: deps.limits.panelPerIp,
            ops: deps.limits.opsPerIp,
          },
          admitSend: sending.admitSend,
          pageErrors: { prefix: PANEL_PREFIX, render: panelErrorResponse },
        },
        routes,
      ),
    )
    .use(healthRoutes(deps))
    .use(oauthMetadataRoutes(deps))
    .use(webhookRoutes(deps))
    .use(opsRoutes(deps))
    .use(panelRoutes(deps, sending))
    .use(api);
  assertEveryRouteHasPolicy(app.routes);
  return app;
}

export type App = ReturnType<typeof createApp>;
