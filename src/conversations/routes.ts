import type { AppDeps } from "../app-deps.ts";
import { readWith } from "../db/read-replica.ts";
import { listEnvelope } from "../http/lists.ts";
import { pathOf } from "../http/paths.ts";
import { POLICIES } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import { presentConversation } from "./presenter.ts";
import { ConversationList, ConversationsQuery } from "./schemas.ts";
import { listConversations } from "./service.ts";

export function conversationRoutes(deps: AppDeps) {
  return apiRoutes().get(
    "/conversations",
    async ({ auth, query, request }) => {
      const page = await readWith(deps, auth, (db) => listConversations(db, auth.tenantId, query));
      return listEnvelope(pathOf(request.url), page.rows.map(presentConversation), page.hasMore);
    },
    {
      policy: POLICIES.apiRead,
      scope: "messaging:read",
      query: ConversationsQuery,
      response: {
        200: ConversationList,
        ...standardErrors("parameter_invalid", "parameter_unknown"),
      },
      detail: {
        operationId: "listConversations",
        summary: "List conversations",
        description:
          "One entry per contact, with its last message and unread count, newest first by default. To page, pass the last item's `last_message.created` as `before`: only conversations whose last message is older are listed. A page may hold fewer than `limit` items so that no second is split across pages.",
        tags: ["Conversations"],
      },
    },
  );
}
