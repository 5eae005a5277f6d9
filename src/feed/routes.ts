import type { AppDeps } from "../app-deps.ts";
import { readWith } from "../db/read-replica.ts";
import { cursorList } from "../http/lists.ts";
import { pathOf } from "../http/paths.ts";
import { POLICIES } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import { createFeedCursorCodec } from "./cursor.ts";
import { readFeedHead } from "./heads.ts";
import { presentFeedMessage } from "./presenter.ts";
import { FEED_LIMIT, FeedList, FeedQuery } from "./schemas.ts";
import { readFeed } from "./service.ts";

/** GET /messages, the tenant-wide feed (POST /messages, sending, lives in src/messages/). */
export function feedRoutes(deps: AppDeps) {
  const cursors = createFeedCursorCodec(deps.config.jwtSecret, deps.config.previousSecrets);
  const readHead = (tenantId: string) => readFeedHead(deps.redis, deps.keys, tenantId);
  return apiRoutes().get(
    "/messages",
    async ({ auth, query, request }) => {
      const page = await readFeed(
        (work) => readWith(deps, auth, work),
        cursors,
        auth.tenantId,
        query.since,
        query.limit ?? FEED_LIMIT.default,
        readHead,
      );
      return cursorList(pathOf(request.url), page, presentFeedMessage);
    },
    {
      policy: POLICIES.apiRead,
      scope: "messaging:read",
      query: FeedQuery,
      response: {
        200: FeedList,
        ...standardErrors("parameter_invalid", "parameter_unknown"),
      },
      detail: {
        operationId: "listMessages",
        summary: "Read the message feed",
        description:
          "Every message of your account, inbound and outbound, in one fixed order given once a message is stored. Follow it with `since` = the previous `next_cursor` (returned on every page, even an empty one) and persist the cursor. Delivery is at least once: de-duplicate by `id`. Messages still being stored appear on a later call, in order; a few seconds' delay is normal. Provider system notices are excluded.",
        tags: ["Messages"],
      },
    },
  );
}
