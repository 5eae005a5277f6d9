import { capText } from "../http/paths.ts";
import { requestState } from "../http/request-state.ts";
import type { PipelineDeps } from "./pipeline-deps.ts";
import type { RouteIndex } from "./route-index.ts";

/** What the after-response hook is given (Elysia's `onAfterResponse` context). */
interface AnsweredContext {
  request: Request;
  set: { status?: number | string };
  path: string;
  route: string;
  responseValue: unknown;
}

/**
 * The access log of an answered request, and its metrics: its status, duration, and the template of
 * the route it matched (or would have matched), never its raw path.
 */
export function accessLog(deps: Pick<PipelineDeps, "logger" | "metrics">, index: RouteIndex) {
  return ({ request, set, path, route, responseValue }: AnsweredContext) => {
    const state = requestState(request);
    if (!state) return;
    const status =
      state.status ??
      (responseValue instanceof Response
        ? responseValue.status
        : typeof set.status === "number"
          ? set.status
          : 200);
    const seconds = (performance.now() - state.startedAt) / 1000;
    // The matched route's template, never the raw path: ids in paths would be unbounded series.
    const template = route || index.templateOf(request.method, path) || "unmatched";
    const labels = { method: request.method, route: template, status: String(status) };
    deps.metrics.httpRequests.inc(labels);
    deps.metrics.httpRequestDuration.observe(labels, seconds);
    // Under load the log is usually off (LOG_LEVEL=warn): its record is then not even built.
    if (!deps.logger.isLevelEnabled("info")) return;
    deps.logger.info(
      {
        request_id: state.requestId,
        method: request.method,
        route: template,
        path: capText(path, 200),
        status,
        duration_ms: Math.round(seconds * 100_000) / 100,
        tenant: state.auth?.tenantId ?? null,
        application: state.auth?.clientId ?? state.tokenClientId ?? null,
      },
      "request",
    );
  };
}
