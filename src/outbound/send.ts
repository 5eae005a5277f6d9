import { sql } from "kysely";
import { type ChannelProvider, type OutboundPayload, ProviderError } from "../channel/provider.ts";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import type { MessageFailure } from "../db/schema.ts";
import type { Logger } from "../logger.ts";
import type { StoredContent } from "../messages/presenter.ts";
import { applyStatusEvents, recordProviderMessageId } from "./status.ts";

/**
 * The send worker's job: hand one accepted message to the provider, exactly once.
 *
 * Before calling the provider the attempt is recorded (send_started_at); after the provider's
 * answer, its message id. A worker killed in between leaves the attempt "in doubt": the provider
 * may have sent it. The send carries our message id as Graph's biz_opaque_callback_data, which
 * every status webhook of that send echoes; so before trying again we look for such a status, and
 * only after `sendInDoubtMs` (configuration) without one do we conclude that the first attempt never arrived.
 */

export type DeliveryOutcome = "sent" | "failed" | "adopted" | "skipped";

export interface SendDeps {
  config: { workers: { sendInDoubtMs: number } };
  db: Db;
  provider: ChannelProvider;
  clock: Clock;
  logger: Logger;
}

/** Thrown to have the queue try again later (BullMQ backoff). */
export class SendNotYetPossible extends Error {}

async function markFailed(db: Db, clock: Clock, messageId: string, failure: MessageFailure) {
  await db
    .updateTable("messages")
    .set({
      status: "failed",
      failure: JSON.stringify(failure),
      send_started_at: null,
      updated_at: clock.now(),
    })
    .where("id", "=", messageId)
    .where("status", "=", "accepted")
    .execute();
}

/** A provider id proven by a status webhook that echoed this message's id. */
async function echoedProviderId(db: Db, messageId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom("status_events")
    .select("provider_message_id")
    .where("client_reference", "=", messageId)
    .limit(1)
    .executeTakeFirst();
  return row?.provider_message_id;
}

export function outboundPayload(content: StoredContent, to: string, messageId: string): OutboundPayload {
  if (content.kind === "text") return { kind: "text", to, body: content.body, callbackData: messageId };
  return {
    kind: "template",
    to,
    name: content.template_name,
    language: content.language,
    components: content.components as Extract<OutboundPayload, { kind: "template" }>["components"],
    callbackData: messageId,
  };
}

export async function deliverOutboundMessage(
  deps: SendDeps,
  messageId: string,
  options: { finalAttempt: boolean },
): Promise<DeliveryOutcome> {
  const row = await deps.db
    .selectFrom("messages")
    .innerJoin("contacts", "contacts.id", "messages.contact_id")
    .innerJoin("senders", "senders.id", "messages.sender_id")
    .select([
      "messages.status",
      "messages.provider_message_id",
      "messages.send_started_at",
      "messages.content",
      "contacts.phone",
      "senders.provider_phone_number_id",
      "senders.waba_id",
      "senders.access_token",
      "senders.active as sender_active",
    ])
    .where("messages.id", "=", messageId)
    .where("messages.direction", "=", "outbound")
    .executeTakeFirst();
  if (row?.status !== "accepted" || row.provider_message_id) return "skipped";

  if (!row.sender_active && !row.send_started_at) {
    // Deactivated after the message was accepted (the api's sender cache lives a few seconds).
    await markFailed(deps.db, deps.clock, messageId, {
      code: "sender_inactive",
      message: "The sender was deactivated before the message could be sent.",
      retryable: false,
    });
    return "failed";
  }

  const now = deps.clock.now();
  if (row.send_started_at) {
    const echoed = await echoedProviderId(deps.db, messageId);
    if (echoed) {
      // The earlier attempt did reach the provider: adopt its id instead of sending again.
      await recordProviderMessageId(deps.db, deps.clock, messageId, echoed);
      await applyStatusEvents(deps.db, deps.clock, echoed);
      deps.logger.info(
        { message_id: messageId, provider_message_id: echoed },
        "in-doubt send confirmed by webhook",
      );
      return "adopted";
    }
    if (now.getTime() - row.send_started_at.getTime() < deps.config.workers.sendInDoubtMs) {
      throw new SendNotYetPossible("the previous attempt's outcome is not known yet");
    }
  }

  // Claim the attempt; a twin job that claimed it first makes this one a no-op.
  const claimed = await deps.db
    .updateTable("messages")
    .set({ send_started_at: now, send_attempts: sql`send_attempts + 1` })
    .where("id", "=", messageId)
    .where("status", "=", "accepted")
    .where("provider_message_id", "is", null)
    .where((eb) =>
      eb.or([
        eb("send_started_at", "is", null),
        eb("send_started_at", "<=", new Date(now.getTime() - deps.config.workers.sendInDoubtMs)),
      ]),
    )
    .returning("send_attempts")
    .executeTakeFirst();
  if (!claimed) return "skipped";

  const payload = outboundPayload(row.content as unknown as StoredContent, row.phone, messageId);
  const credentials = {
    phoneNumberId: row.provider_phone_number_id,
    wabaId: row.waba_id,
    accessToken: row.access_token,
  };
  try {
    const { providerMessageId } = await deps.provider.sendMessage(credentials, payload);
    await recordProviderMessageId(deps.db, deps.clock, messageId, providerMessageId);
    // Statuses can overtake the send's answer; they wait in status_events for this id.
    await applyStatusEvents(deps.db, deps.clock, providerMessageId);
    return "sent";
  } catch (error) {
    if (!(error instanceof ProviderError)) throw error;
    // An answer from the provider settles the attempt; a timeout or broken connection does not.
    const answered = error.httpStatus !== undefined;
    if (answered) {
      await deps.db
        .updateTable("messages")
        .set({ send_started_at: null })
        .where("id", "=", messageId)
        .execute();
    }
    if ((error.retryable || !answered) && !options.finalAttempt) throw error;
    await markFailed(deps.db, deps.clock, messageId, {
      code: error.code,
      message: error.message,
      retryable: error.retryable,
    });
    deps.logger.warn(
      { message_id: messageId, code: error.code, attempts: claimed.send_attempts },
      "send failed for good",
    );
    return "failed";
  }
}
