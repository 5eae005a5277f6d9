import type { AppDeps } from "../app-deps.ts";
import { listEnvelope } from "../http/lists.ts";
import { pathOf } from "../http/paths.ts";
import { POLICIES } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import { presentTemplate } from "../templates/presenter.ts";
import { presentSender } from "./presenter.ts";
import { dailyQuotaToday } from "./quota.ts";
import { listActiveSenders, senderBacklogs } from "./repository.ts";
import { SenderIdParams, SenderList, TemplateList } from "./schemas.ts";
import { listTemplatesOfSender } from "./service.ts";

export function senderRoutes(deps: AppDeps) {
  return apiRoutes()
    .get(
      "/senders",
      async ({ auth, request }) => {
        const [senders, quota] = await Promise.all([
          listActiveSenders(deps.db, auth.tenantId),
          // Every sender is on CHANNEL, so they share the tenant's one quota.
          dailyQuotaToday(deps, auth.tenantId),
        ]);
        const backlogs = await senderBacklogs(
          deps.db,
          auth.tenantId,
          senders.map((sender) => sender.id),
        );
        return listEnvelope(
          pathOf(request.url),
          senders.map((sender) => presentSender(sender, quota, backlogs.get(sender.id) ?? 0)),
        );
      },
      {
        policy: POLICIES.apiRead,
        scope: "messaging:read",
        response: { 200: SenderList, ...standardErrors() },
        detail: {
          operationId: "listSenders",
          summary: "List senders",
          description:
            "The active connected sender numbers of your account, each with the daily send quota of its channel (`quota`: the limit, today's use, and when it resets) and its backpressure (`throughput`: its pace in messages per second, its backlog of accepted messages not yet handed to the provider, and how long that backlog takes to drain).",
          tags: ["Senders"],
        },
      },
    )
    .get(
      "/senders/:sender_id/templates",
      async ({ auth, params, request }) => {
        const templates = await listTemplatesOfSender(deps.db, auth.tenantId, params.sender_id);
        return listEnvelope(pathOf(request.url), templates.map(presentTemplate));
      },
      {
        policy: POLICIES.apiRead,
        scope: "messaging:read",
        params: SenderIdParams,
        response: { 200: TemplateList, ...standardErrors("parameter_invalid", "resource_missing") },
        detail: {
          operationId: "listSenderTemplates",
          summary: "List a sender's templates",
          description:
            "The APPROVED templates of one sender, by name and language, with the variables a send must fill. Pending, rejected and deleted templates are not listed.",
          tags: ["Senders"],
        },
      },
    );
}
