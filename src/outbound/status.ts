import { sql } from "kysely";
import { normalizeProviderError } from "../channel/provider.ts";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import type { MessageFailure } from "../db/schema.ts";

/**
 * Message status moves forward only (DESIGN §3): accepted -> sent -> delivered -> read, skips
 * allowed; failed only from accepted or sent; a later delivered/read supersedes failed; anything
 * else (out-of-order webhooks) is ignored.
 */
const RANK: Record<string, number> = { accepted: 0, sent: 1, delivered: 2, read: 3 };

export function nextStatus(current: string, event: string): string | undefined {
  if (event === "failed") return current === "accepted" || current === "sent" ? "failed" : undefined;
  const eventRank = RANK[event];
  if (eventRank === undefined) return undefined;
  if (current === "failed") return event === "delivered" || event === "read" ? event : undefined;
  const currentRank = RANK[current];
  return currentRank !== undefined && eventRank > currentRank ? event : undefined;
}

interface ProviderStatusError {
  code?: number | string;
  title?: string;
  message?: string;
  error_data?: { details?: string };
}

export function failureFromStatusErrors(errors: unknown[] | null): MessageFailure {
  const first = (errors?.[0] ?? {}) as ProviderStatusError;
  const detail =
    first.error_data?.details ?? first.message ?? first.title ?? "The provider reported a failure.";
  const normalized = normalizeProviderError(
    first.code === undefined ? undefined : Number(first.code),
    detail,
  );
  return { code: normalized.code, message: normalized.message, retryable: normalized.retryable };
}

/** Records the provider's id; `sent` unless a status webhook got further already. */
export async function recordProviderMessageId(
  db: Db,
  clock: Clock,
  messageId: string,
  providerMessageId: string,
): Promise<boolean> {
  const result = await db
    .updateTable("messages")
    .set({
      provider_message_id: providerMessageId,
      status: sql`CASE WHEN status = 'accepted' THEN 'sent' ELSE status END`,
      send_started_at: null,
      updated_at: clock.now(),
    })
    .where("id", "=", messageId)
    .where("direction", "=", "outbound")
    .where("provider_message_id", "is", null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) > 0;
}

/**
 * Applies every unapplied status event of one provider message id, oldest first. Events for a
 * message we do not know yet stay unapplied until it appears (a status can overtake the send
 * response); the send worker and the sweeper call this again then.
 *
 * An event moves only a message of the sender whose phone_number_id its webhook named: a webhook
 * for number B cannot move number A's messages, by provider id or by our echoed id. Such an event
 * is settled without effect. Events stored before they carried a sender apply as they always did.
 */
export async function applyStatusEvents(db: Db, clock: Clock, providerMessageId: string): Promise<number> {
  return db.transaction().execute((trx) => applyStatusEventsIn(trx, clock, providerMessageId));
}

async function applyStatusEventsIn(trx: Db, clock: Clock, providerMessageId: string): Promise<number> {
  const message = await trx
    .selectFrom("messages")
    .select(["seq", "status", "failure", "sender_id"])
    .where("provider_message_id", "=", providerMessageId)
    .where("direction", "=", "outbound")
    .forUpdate()
    .executeTakeFirst();
  if (!message?.status) {
    // Not known by this id yet. If the send echoed our message id back (biz_opaque_callback_data),
    // the send worker never learned the provider's id (crash, timeout): adopt it now.
    const echo = await trx
      .selectFrom("status_events")
      .innerJoin("messages", "messages.id", "status_events.client_reference")
      .select("status_events.client_reference")
      .where("status_events.provider_message_id", "=", providerMessageId)
      .where((eb) =>
        eb.or([
          eb("status_events.sender_id", "is", null),
          eb("status_events.sender_id", "=", eb.ref("messages.sender_id")),
        ]),
      )
      .limit(1)
      .executeTakeFirst();
    if (!echo?.client_reference) return 0;
    const adopted = await recordProviderMessageId(trx, clock, echo.client_reference, providerMessageId);
    return adopted ? applyStatusEventsIn(trx, clock, providerMessageId) : 0;
  }

  const events = await trx
    .selectFrom("status_events")
    .select(["id", "status", "errors", "sender_id"])
    .where("provider_message_id", "=", providerMessageId)
    .where("applied_at", "is", null)
    .orderBy("provider_timestamp")
    .orderBy("id")
    .forUpdate()
    .execute();
  if (events.length === 0) return 0;

  let status = message.status;
  let failure = message.failure;
  for (const event of events) {
    if (event.sender_id !== null && event.sender_id !== message.sender_id) continue;
    const next = nextStatus(status, event.status);
    if (!next) continue;
    status = next;
    failure = next === "failed" ? failureFromStatusErrors(event.errors) : null;
  }
  if (status !== message.status) {
    await trx
      .updateTable("messages")
      .set({ status, failure: failure ? JSON.stringify(failure) : null, updated_at: clock.now() })
      .where("seq", "=", message.seq)
      .execute();
  }
  await trx
    .updateTable("status_events")
    .set({ applied_at: clock.now() })
    .where(
      "id",
      "in",
      events.map((e) => e.id),
    )
    .execute();
  return events.length;
}
