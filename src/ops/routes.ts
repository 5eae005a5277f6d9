import { Elysia } from "elysia";
import type { AppDeps } from "../app.ts";
import { requestState } from "../http/request-state.ts";
import { renderMetrics } from "../metrics/scrape.ts";
import { DASHBOARD_PATH, queueDashboard } from "./dashboard.ts";
import { checkOpsRequest, opsAccess } from "./guard.ts";

/**
 * The operator endpoints outside /v2: Prometheus metrics and the queue dashboard, one guard for both.
 * Disabled, they are not registered at all, so every method on them answers like any unknown path.
 */
export function opsRoutes(deps: AppDeps) {
  const access = opsAccess(deps.config);
  if (access.mode === "disabled") return new Elysia();
  const dashboard = queueDashboard(deps.queues);
  const toDashboard = ({ request }: { request: Request }) =>
    dashboard(request, requestState(request)?.rawBody);

  return new Elysia()
    .onBeforeHandle(({ request }) => checkOpsRequest(access, request))
    .get(
      "/metrics",
      async () => {
        const { body, contentType } = await renderMetrics(deps);
        return new Response(body, { headers: { "content-type": contentType, "cache-control": "no-store" } });
      },
      { detail: { hide: true } },
    )
    .all(DASHBOARD_PATH, toDashboard, { detail: { hide: true } })
    .all(`${DASHBOARD_PATH}/*`, toDashboard, { detail: { hide: true } });
}
