import type { AppDeps } from "../app-deps.ts";
import { ContactIdParams } from "../contacts/schemas.ts";
import { readWith } from "../db/read-replica.ts";
import { listEnvelope } from "../http/lists.ts";
import { pathOf } from "../http/paths.ts";
import { POLICIES } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import { presentHistoryMessage } from "./presenter.ts";
import { HistoryList, HistoryQuery } from "./schemas.ts";
import { listContactHistory } from "./service.ts";

export function historyRoutes(deps: AppDeps) {
  return apiRoutes().get(
    "/contacts/:contact_id/messages",
    async ({ auth, params, query, request }) => {
      const page = await readWith(deps, auth, (db) =>
        listContactHistory(db, auth.tenantId, params.contact_id, query),
      );
      return listEnvelope(pathOf(request.url), page.rows.map(presentHistoryMessage), page.hasMore);
    },
    {
      policy: POLICIES.apiRead,
      scope: "messaging:read",
      params: ContactIdParams,
      query: HistoryQuery,
      response: {
        200: HistoryList,
        ...standardErrors("parameter_invalid", "parameter_unknown", "resource_missing"),
      },
      detail: {
        operationId: "listContactMessages",
        summary: "List a contact's messages",
        description:
          "Inbound and outbound messages of one contact, oldest first by default. `before` (a `msg_` id of this contact) lists only older messages; to page back through the history use `order=desc` and pass the last message's id as `before`. Messages of the same second keep one stable order. Provider system notices are not listed.",
        tags: ["Contacts"],
      },
    },
  );
}
