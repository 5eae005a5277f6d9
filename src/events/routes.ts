import type { AppDeps } from "../app-deps.ts";
import { readWith } from "../db/read-replica.ts";
import { FEED_LIMIT } from "../feed/schemas.ts";
import { cursorList } from "../http/lists.ts";
import { pathOf } from "../http/paths.ts";
import { POLICIES } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import { createEventCursorCodec } from "./cursor.ts";
import { presentEvent } from "./presenter.ts";
import { EventList, EventQuery } from "./schemas.ts";
import { readEvents } from "./service.ts";

/** GET /events: the tenant's event log (DESIGN §12), read from a cursor like the feed. */
export function eventRoutes(deps: AppDeps) {
  const cursors = createEventCursorCodec(deps.config);
  return apiRoutes().get(
    "/events",
    async ({ auth, query, request }) => {
      const page = await readEvents((work) => readWith(deps, auth, work), cursors, auth.tenantId, {
        since: query.since,
        limit: query.limit ?? FEED_LIMIT.default,
        types: query.types,
      });
      return cursorList(pathOf(request.url), page, presentEvent);
    },
    {
      policy: POLICIES.apiRead,
      scope: "messaging:read",
      query: EventQuery,
      response: {
        200: EventList,
        ...standardErrors("parameter_invalid", "parameter_unknown"),
      },
      detail: {
        operationId: "listEvents",
        summary: "Read the event log",
        description:
          "What happened to your messages, in one fixed order per account: `message.received` (a customer wrote), `message.sent`, `message.delivered`, `message.read` (each status that moved an outbound message forward, in its order), `message.failed` (with `data.failure`) and `message.canceled` (a scheduled or waiting send canceled before it was handed over). Follow it with `since` = the previous `next_cursor` (on every page, even an empty one); absent, it starts at the oldest event kept (30 days). With `types`, one call looks at up to 5,000 events of the log: a page may then hold fewer than `limit`, even none, with `has_more` true and a `next_cursor` past what it looked at; ask again at once. At least once: de-duplicate by `id`. Events of one message come in its status order; events of one contact in feed order.",
        tags: ["Messages"],
      },
    },
  );
}
