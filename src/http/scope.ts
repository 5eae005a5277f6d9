import { Elysia } from "elysia";
import { authorize, type Scope, throwBodyProblem } from "./request-state.ts";
import { routePolicy } from "./route-policy.ts";

/**
 * `{ scope: "messaging:read" }` on a route: 401/403 before the body is validated (transform runs
 * ahead of validation), `auth` handed to the handler, and the requirement recorded in the route's
 * OpenAPI detail (`x-scope`), which is also how tests enumerate every protected route.
 */
export const scopeGuard = new Elysia({ name: "scope-guard" }).macro({
  scope: (needed: Scope) => ({
    // A bearer token from POST /oauth/token, the client credentials flow: the document's one scheme,
    // so the reference's Authorize dialog offers one way in (src/docs/openapi.ts).
    detail: {
      "x-scope": needed,
      security: [{ oauth2: [needed] }],
    } as Record<string, unknown>,
    transform({ request }: { request: Request }) {
      authorize(request, needed);
      throwBodyProblem(request);
    },
    resolve({ request }: { request: Request }) {
      return { auth: authorize(request, needed) };
    },
  }),
});

/** The scope a route needs, read back from its OpenAPI detail. */
export function routeScope(route: { hooks?: { detail?: unknown } }): Scope | undefined {
  return (route.hooks?.detail as { "x-scope"?: Scope } | undefined)?.["x-scope"];
}

/** Where a feature's API route plugin starts: the route policy and scope macros its routes declare. */
export function apiRoutes() {
  return new Elysia().use(routePolicy).use(scopeGuard);
}
