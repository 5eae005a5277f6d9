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

/**
 * Applies every unapplied status event of one provider message id, oldest first. Events for a
 * message we do not know yet stay unapplied until it appears (a status can overtake the send
 * response); the send worker and the sweeper call this again then.
 */
export async function applyStatusEvents(db: Db, clock: Clock, providerMessageId: string): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const message = await trx
      .selectFrom("messages")
      .select(["seq", "status", "failure"])
      .where("provider_message_id", "=", providerMessageId)
      .where("direction", "=", "outbound")
      .forUpdate()
      .executeTakeFirst();
    if (!message?.status) return 0;

    const events = await trx
      .selectFrom("status_events")
      .select(["id", "status", "errors"])
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
  });
}
