import type { TSchema } from "@sinclair/typebox";
import { declaredPolicy, type RoutePolicy } from "../http/route-policy.ts";

export interface RouteInfo {
  method: string;
  path: string;
  /** Elysia's route hooks: `body` is the route's schema, `detail` holds its policy. */
  hooks?: unknown;
}

/**
 * Every route must declare its policy (src/http/route-policy.ts): called once the app is whole, so a
 * route added without one fails at start-up, never at a request.
 */
export function assertEveryRouteHasPolicy(routes: readonly RouteInfo[]): void {
  const missing = routes.filter((route) => !declaredPolicy(route)).map((r) => `${r.method} ${r.path}`);
  if (missing.length > 0)
    throw new Error(`Routes without a policy (src/http/route-policy.ts): ${missing.join(", ")}`);
}

/**
 * Route lookups: the policy and body schema of a matched route, and for answers given without one,
 * the methods a path takes (405's Allow) and the template a request would have matched (so metrics
 * never label a series by a raw path). Patterns are compiled on first use
 * (the routes are known once the app is whole), most specific (fewest parameters) first.
 */
export function routeIndex(routes: () => readonly RouteInfo[]) {
  let compiled: { regex: RegExp; method: string; path: string }[] | undefined;
  /** What each route declared, by `METHOD template`. */
  let declared: Map<string, { policy?: RoutePolicy; body?: TSchema }> | undefined;
  const declaredBy = (method: string, template: string) => {
    declared ??= new Map(
      routes().map((route) => {
        const body = (route.hooks as { body?: unknown })?.body;
        return [
          `${route.method} ${route.path}`,
          {
            policy: declaredPolicy(route),
            body: typeof body === "object" && body !== null ? (body as TSchema) : undefined,
          },
        ];
      }),
    );
    // HEAD is served by GET routes, and `.all` routes take every method.
    return (
      declared.get(`${method} ${template}`) ??
      (method === "HEAD" ? declared.get(`GET ${template}`) : undefined) ??
      declared.get(`ALL ${template}`)
    );
  };
  const patterns = () =>
    (compiled ??= routes()
      .map((route) => ({
        method: route.method,
        path: route.path,
        params: route.path.split(":").length - 1,
        regex: new RegExp(
          `^${route.path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replace(/:[^/]+/g, "[^/]+")}/?$`,
        ),
      }))
      .sort((a, b) => a.params - b.params));
  return {
    allowedMethods: (path: string): string[] => [
      ...new Set(
        patterns()
          .filter((p) => p.regex.test(path))
          .map((p) => p.method),
      ),
    ],
    templateOf: (method: string, path: string): string | undefined =>
      patterns().find((p) => (p.method === method || p.method === "ALL") && p.regex.test(path))?.path,
    /**
     * The policy of the route the router matched (`template` is Elysia's `route`). Every route has
     * one (assertEveryRouteHasPolicy); a request that still finds none is a bug, refused rather than
     * let through unlimited.
     */
    policyOf(method: string, template: string): RoutePolicy {
      const policy = declaredBy(method, template)?.policy;
      if (!policy) throw new Error(`${method} ${template} has no policy (src/http/route-policy.ts)`);
      return policy;
    },
    /** The body schema the matched route declares, if it declares one. */
    bodySchemaOf: (method: string, template: string): TSchema | undefined =>
      declaredBy(method, template)?.body,
  };
}

export type RouteIndex = ReturnType<typeof routeIndex>;
