import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { ApiError } from "../http/errors.ts";
import { callerIp, requestState } from "../http/request-state.ts";
import { routePolicy } from "../http/route-policy.ts";
import type { RateLimitKind } from "../metrics/index.ts";
import { DASHBOARD_PATH, queueDashboard } from "./dashboard.ts";
import { checkOpsRequest, OPS_AUTH_FAILURES, opsAccess } from "./guard.ts";
import { renderMetrics } from "./metrics-scrape.ts";

/**
 * The operator endpoints outside /v2: Prometheus metrics and the queue dashboard, one guard for both.
 * Disabled, they are not registered at all, so every method on them answers like any unknown path.
 * Failed credentials are throttled per IP (guard.ts); the dashboard is read-only unless
 * OPS_QUEUES_WRITE=1.
 */
export function opsRoutes(deps: AppDeps) {
  const access = opsAccess(deps.config);
  if (access.mode === "disabled") return new Elysia();
  const dashboard = queueDashboard(deps.queues, { readOnly: !deps.config.opsQueuesWrite });
  const toDashboard = ({ request }: { request: Request }) =>
    dashboard(request, requestState(request)?.rawBody);
  const failureWindow = (ip: string) => (mode?: "peek") =>
    deps.redis.attemptWindow(
      deps.keys.opsAuthFailures(ip),
      OPS_AUTH_FAILURES.perIp,
      OPS_AUTH_FAILURES.windowSeconds,
      mode,
    );

  return new Elysia().use(routePolicy).guard({ policy: { limit: "ops-ip", body: "form" } }, (ops) =>
    ops
      .onBeforeHandle(async ({ request }) => {
        const ip = callerIp(request);
        try {
          await checkOpsRequest(access, request, failureWindow(ip));
        } catch (error) {
          if (error instanceof ApiError && error.code === "rate_limit_exceeded")
            deps.metrics.rateLimited.inc({ kind: "auth_failures" satisfies RateLimitKind });
          throw error;
        }
      })
      .get(
        "/metrics",
        async () => {
          const { body, contentType } = await renderMetrics(deps);
          return new Response(body, {
            headers: { "content-type": contentType, "cache-control": "no-store" },
          });
        },
        { detail: { hide: true } },
      )
      .all(DASHBOARD_PATH, toDashboard, { detail: { hide: true } })
      .all(`${DASHBOARD_PATH}/*`, toDashboard, { detail: { hide: true } }),
  );
}
