import { Elysia } from "elysia";
import { sql } from "kysely";
import type { AppDeps } from "../app-deps.ts";
import { POLICIES, routePolicy } from "../http/route-policy.ts";
import { withTimeout } from "../lib/with-timeout.ts";

/** /healthz: the process answers. /readyz: Postgres and Redis answer too (503 otherwise). */
export function healthRoutes(deps: AppDeps) {
  return new Elysia()
    .use(routePolicy)
    .get("/healthz", () => ({ status: "ok" }), { policy: POLICIES.public, detail: { hide: true } })
    .get(
      "/readyz",
      async ({ set }) => {
        const [postgres, redis] = await Promise.all([
          withTimeout(sql`SELECT 1`.execute(deps.db), 2000).then(
            () => "ok",
            () => "unavailable",
          ),
          withTimeout(deps.redis.ping(), 2000).then(
            () => "ok",
            () => "unavailable",
          ),
        ]);
        const ready = postgres === "ok" && redis === "ok";
        if (!ready) {
          set.status = 503;
          set.headers["retry-after"] = "2";
        }
        return { status: ready ? "ready" : "unavailable", postgres, redis };
      },
      { policy: POLICIES.public, detail: { hide: true } },
    );
}
