import { Elysia, t } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { POLICIES, routePolicy } from "../http/route-policy.ts";
import { errorResponses } from "../http/schemas.ts";
import { renderDocsPage } from "./page.ts";

export function docsRoutes(deps: AppDeps) {
  const page = renderDocsPage(deps.config.publicBaseUrl);
  return new Elysia().use(routePolicy).get(
    "/docs",
    ({ set }) => {
      set.headers["content-type"] = "text/html; charset=utf-8";
      return page;
    },
    {
      policy: POLICIES.apiRead,
      response: {
        200: t.String(),
        ...errorResponses("rate_limit_exceeded", "internal_error", "service_unavailable"),
      },
      detail: {
        operationId: "getErrorReference",
        summary: "Error code reference",
        description: "An HTML page with one anchor per error code: the `doc_url` of every error points here.",
        tags: ["Documentation"],
        security: [],
        responses: { 200: { description: "The error reference page.", content: { "text/html": {} } } },
      },
    },
  );
}
