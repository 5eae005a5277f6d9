import { sql } from "kysely";
import { readInboundEvent } from "../channel/webhook-events.ts";
import type { Clock } from "../clock.ts";
import { toE164 } from "../contacts/phone.ts";
import type { Db } from "../db/connect.ts";
import { newId } from "../ids.ts";
import { type NewMessage, storeMessages } from "../messages/store.ts";

/**
 * Turns a stored inbound webhook message into its final record, in one transaction: the contact
 * (upserted by tenant and phone, named from the profile), the contact's 24-hour window, the
 * message as history and feed show it, the conversation summary, and the feed hand-off
 * (DESIGN §6 step 1). Finalizing twice changes nothing.
 */

export interface FinalizeOutcome {
  messageId: string;
  tenantId: string;
  /** False when it had been finalized before (nothing changed). */
  created: boolean;
  /** True when the message went to the feed hand-off. */
  feed: boolean;
}

/** One event's outcome inside a batch, named by the provider's message id. */
export interface BatchOutcome extends FinalizeOutcome {
  providerMessageId: string;
}

/** Default batch size of `finalizePendingInbound`. */
export const FINALIZE_BATCH_SIZE = 500;

interface EventRow {
  provider_message_id: string;
  tenant_id: string;
  sender_id: string;
  payload: Record<string, unknown>;
  finalized_at: Date | null;
  message_id: string | null;
}

/**
 * Finalizes one stored inbound message: the batch of that one event, taken FOR UPDATE (it waits
 * for a batch that holds it, then finds it finalized). Undefined when no such event is stored.
 */
export async function finalizeInbound(
  db: Db,
  clock: Clock,
  providerMessageId: string,
): Promise<FinalizeOutcome | undefined> {
  return db.transaction().execute(async (trx) => {
    const event = await trx
      .selectFrom("inbound_events")
      .selectAll()
      .where("provider_message_id", "=", providerMessageId)
      .forUpdate()
      .executeTakeFirst();
    if (!event) return undefined;
    if (event.finalized_at && event.message_id) {
      return { messageId: event.message_id, tenantId: event.tenant_id, created: false, feed: false };
    }
    const [outcome] = await finalizeEvents(trx, clock, [event as EventRow]);
    if (!outcome) return undefined;
    const { providerMessageId: _, ...rest } = outcome;
    return rest;
  });
}

/**
 * Finalizes up to `limit` of the oldest unfinalized inbound events in ONE transaction. Rows another
 * caller holds are skipped (SKIP LOCKED), so several workers share a backlog without waiting on
 * each other. Returns one outcome per event finalized; fewer than `limit` means the backlog (as
 * this caller could see it) is drained.
 */
export async function finalizePendingInbound(
  db: Db,
  clock: Clock,
  limit = FINALIZE_BATCH_SIZE,
): Promise<BatchOutcome[]> {
  return db.transaction().execute(async (trx) => {
    const events = await trx
      .selectFrom("inbound_events")
      .selectAll()
      .where("finalized_at", "is", null)
      .orderBy("received_at")
      .orderBy("provider_message_id")
      .limit(limit)
      .forUpdate()
      .skipLocked()
      .execute();
    return finalizeEvents(trx, clock, events as EventRow[]);
  });
}

/**
 * The one implementation, for events the caller has locked and found unfinalized: the messages as
 * the channel reads them, written by the one message writer (contacts with their windows, messages,
 * conversation summaries, feed hand-off), then the events' finalized marks.
 */
async function finalizeEvents(trx: Db, clock: Clock, rows: readonly EventRow[]): Promise<BatchOutcome[]> {
  const events = rows.filter((e) => !e.finalized_at);
  if (events.length === 0) return [];

  const batch = events.map((event): NewMessage => {
    const received = readInboundEvent(event.payload);
    const sentAt = received.sentAt ?? clock.now();
    return {
      id: newId("msg"),
      tenantId: event.tenant_id,
      senderId: event.sender_id,
      direction: "inbound",
      phone: toE164(received.from) ?? `+${received.from.replace(/\D/g, "")}`,
      // The first name the batch brings wins (what finalizing one by one keeps).
      contactName: received.profileName,
      // The window moves by the newest non-system provider timestamp, never backwards.
      windowFrom: received.system ? null : sentAt,
      type: received.type,
      preview: received.preview,
      text: received.text,
      mediaType: received.mediaType,
      mediaFilename: received.mediaFilename,
      status: null,
      applicationId: null,
      content: null,
      providerMessageId: event.provider_message_id,
      createdAt: sentAt,
      visible: !received.system,
    };
  });
  await storeMessages(trx, batch);

  await sql`
    UPDATE inbound_events AS e
    SET finalized_at = ${clock.now()}, message_id = v.message_id
    FROM unnest(${batch.map((m) => m.providerMessageId)}::text[],
                ${batch.map((m) => m.id)}::text[]) AS v(provider_message_id, message_id)
    WHERE e.provider_message_id = v.provider_message_id`.execute(trx);

  return batch.map((m) => ({
    providerMessageId: m.providerMessageId!,
    messageId: m.id,
    tenantId: m.tenantId,
    created: true,
    feed: m.visible,
  }));
}
