import { t } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { readWith } from "../db/read-replica.ts";
import { ApiError } from "../http/errors.ts";
import { POLICIES } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import { presentStoredMessage } from "./presenter.ts";
import { findMessage } from "./repository.ts";
import { MessageSchema } from "./schemas.ts";

/** GET /messages/{id} (DESIGN §13): one message, as POST returned it, with what happened to it since. */
export function messageLookupRoutes(deps: AppDeps) {
  return apiRoutes().get(
    "/messages/:message_id",
    async ({ auth, params }) => {
      const row = await readWith(deps, auth, (db) => findMessage(db, auth.tenantId, params.message_id));
      if (!row) {
        throw new ApiError("resource_missing", `No such message: ${params.message_id}.`, {
          param: "message_id",
        });
      }
      return presentStoredMessage(row);
    },
    {
      policy: POLICIES.apiRead,
      scope: "messaging:read",
      params: t.Object({ message_id: t.String({ maxLength: 100, description: "a `msg_` id" }) }),
      response: { 200: MessageSchema, ...standardErrors("parameter_invalid", "resource_missing") },
      detail: {
        operationId: "getMessage",
        summary: "Get a message",
        description:
          "One message of your account by its id, inbound or outbound: the Message as POST /messages returned it, with its current `status` and `failure`, its `client_reference`, and `retrying` while it waits to be tried again after a failed attempt.",
        tags: ["Messages"],
      },
    },
  );
}
