import { t } from "elysia";
import { sql } from "kysely";
import type { AppDeps } from "../app-deps.ts";
import type { Db } from "../db/connect.ts";
import { unsent } from "../db/unsent.ts";
import { ApiError } from "../http/errors.ts";
import { POLICIES } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import { nudgeSends } from "../queues/index.ts";
import { presentStoredMessage } from "./presenter.ts";
import { findMessage } from "./repository.ts";
import { MessageSchema } from "./schemas.ts";

/**
 * POST /messages/{id}/cancel (DESIGN §13). Race-free because it is decided by the same row the send
 * claim takes (src/outbound/claim.ts): a message is cancelable while it is scheduled, or accepted and
 * not claimed (no send_started_at: never claimed, or waiting for a retry after an answered failure).
 * The claim locks the rows it takes and stamps send_started_at in one statement; this UPDATE either
 * commits first (the claim then finds the row `canceled` and leaves it) or waits for the claim and
 * finds it claimed (409). So a 200 is never followed by a provider call.
 *
 * One statement also logs `message.canceled` (DESIGN §12) and names the next unsent message of the
 * pair, which may have been held behind the canceled one: it is nudged at once.
 */
async function cancelMessage(
  db: Db,
  tenantId: string,
  messageId: string,
  now: Date,
): Promise<{ canceled: boolean; next: string | null }> {
  const { rows } = await sql<{ id: string; next: string | null }>`
    WITH canceled AS (
      UPDATE messages m SET status = 'canceled', parked = 'canceled', send_not_before = NULL, last_error = NULL,
        updated_at = ${now}
      WHERE m.tenant_id = ${tenantId} AND m.id = ${messageId}
        AND m.direction = 'outbound' AND m.provider_message_id IS NULL AND m.failure IS NULL
        AND (m.parked = 'scheduled'
             OR (m.parked IS NULL AND m.status = 'accepted' AND m.send_started_at IS NULL))
      RETURNING m.id, m.seq, m.tenant_id, m.sender_id, m.contact_id, m.status
    ), emitted AS (
      INSERT INTO event_pending (tenant_id, shard, type, message_id, status)
      SELECT tenant_id, feed_shard_of(tenant_id, (SELECT shards FROM feed_shards)), 'message.canceled', id, status
      FROM canceled
    )
    SELECT c.id, (SELECT e.id FROM messages e
                  WHERE e.sender_id = c.sender_id AND e.contact_id = c.contact_id
                    AND ${unsent("e")} AND e.seq > c.seq
                  ORDER BY e.seq LIMIT 1) AS next
    FROM canceled c`.execute(db);
  const row = rows[0];
  return { canceled: row !== undefined, next: row?.next ?? null };
}

export function messageCancelRoutes(deps: AppDeps) {
  return apiRoutes().post(
    "/messages/:message_id/cancel",
    async ({ auth, params }) => {
      const id = params.message_id;
      const { canceled, next } = await cancelMessage(deps.db, auth.tenantId, id, deps.clock.now());
      if (next) {
        // Best effort: the sweeper finds a held message nobody nudged.
        await nudgeSends(deps.queues.send, [next], deps.config.workers.sendRetryBaseMs, {
          jobId: () => `c-${next}-${id}`,
        }).catch((error: Error) =>
          deps.logger.warn({ message_id: next, err: error.message }, "successor of a cancel not nudged"),
        );
      }
      // The primary: a replica may not have the cancel yet.
      const row = await findMessage(deps.db, auth.tenantId, id);
      if (!row) throw new ApiError("resource_missing", `No such message: ${id}.`, { param: "message_id" });
      if (!canceled && row.status !== "canceled") {
        throw new ApiError(
          "message_not_cancelable",
          row.direction === "inbound"
            ? "This is a message you received; only your own sends can be canceled."
            : row.status === "accepted"
              ? "The message is accepted and a send worker has already taken it to hand to the provider, so it can no longer be canceled."
              : `The message is ${row.status}: it was already handed to the provider (or failed), so it can no longer be canceled.`,
          { param: "message_id" },
        );
      }
      return presentStoredMessage(row);
    },
    {
      // A cancel sends nothing: it spends the read limit, not the send limit sends need.
      policy: POLICIES.apiRead,
      scope: "messaging:send",
      params: t.Object({ message_id: t.String({ maxLength: 100, description: "a `msg_` id" }) }),
      response: {
        200: MessageSchema,
        ...standardErrors("parameter_invalid", "resource_missing", "message_not_cancelable"),
      },
      detail: {
        operationId: "cancelMessage",
        summary: "Cancel a message",
        description:
          "Cancels a message that was not yet handed to the provider: one `scheduled` for later, or `accepted` and still waiting (behind others, or for a retry). 200 with the message in status `canceled`; the provider never receives it, whatever the timing. `canceled` is final, and canceling it again answers 200 again. A message already handed over (or failed) → 409 `message_not_cancelable`, its status in the error's message. The daily quota unit it spent is not given back.",
        tags: ["Messages"],
      },
    },
  );
}
