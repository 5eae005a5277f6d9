import { Elysia } from "elysia";
import { accessLog } from "./access-log.ts";
import { bodyRefused, readBody } from "./body.ts";
import { errorRenderer } from "./error-render.ts";
import type { PipelineDeps } from "./pipeline-deps.ts";
import { policyGate } from "./policy.ts";
import { startRequest } from "./request-start.ts";
import { type RouteInfo, routeIndex } from "./route-index.ts";

export type { PipelineDeps } from "./pipeline-deps.ts";
export { clientIpOf } from "./request-start.ts";
export { assertEveryRouteHasPolicy } from "./route-index.ts";

/**
 * The shared HTTP concerns, once for every route: request id, the policy the matched route declared
 * (src/http/route-policy.ts: its limit, spent before the body is read; authentication; its body cap),
 * body parsing, one error renderer, and the access log. Requests that match no route spend the
 * caller's read limit too, so 404s are limited and carry the headers.
 *
 * Here the hooks, in the order they run; each concern is its own module of src/pipeline/.
 */
export function requestPipeline(deps: PipelineDeps, routes: () => readonly RouteInfo[]) {
  const index = routeIndex(routes);
  const { applyPolicy, spendCallerLimit } = policyGate(deps, index);
  const renderError = errorRenderer(deps, index, spendCallerLimit);
  const logAnswer = accessLog(deps, index);

  return (
    new Elysia()
      // Requests not yet answered (graceful shutdown waits for them; see src/server.ts).
      .state("inFlight", 0)
      .onRequest(({ request, set, server, store }) => {
        store.inFlight++;
        startRequest(request, set, server, deps.trustProxy);
      })

      // Every hook names the parts of the context it reads, and never hands the context on whole:
      // Elysia infers from the hooks' source what each request must prepare, and a context passed
      // to a function makes it parse the cookies, copy the headers and more for every route.

      // The body, read after the route's policy (body.ts).
      .onParse({ as: "global" }, async ({ request, set, route }) =>
        readBody(request, await applyPolicy({ request, set, route })),
      )

      // The route's policy for requests without a body; then the route's body schema (body.ts).
      .onTransform({ as: "global" }, async (context) => {
        const { request, route } = context;
        const state = await applyPolicy({ request, set: context.set, route });
        // A refused body is recorded in the state; the validator then sees an empty one (body.ts).
        if (bodyRefused(request, route, context.body, state, index)) context.body = null;
      })

      .onError({ as: "global" }, renderError)

      .onAfterResponse({ as: "global" }, ({ request, set, path, route, responseValue, store }) => {
        store.inFlight--;
        logAnswer({ request, set, path, route, responseValue });
      })
  );
}
