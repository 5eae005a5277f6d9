import { sql } from "kysely";
import { type ReceivedMessage, readInboundEvent } from "../channel/webhook-events.ts";
import type { Clock } from "../clock.ts";
import { type IdentityInput, resolveIdentities } from "../contacts/identity.ts";
import { type OptOutChange, optOutKeyword } from "../contacts/opt-out.ts";
import type { Db } from "../db/connect.ts";
import { newId } from "../ids.ts";
import { type NewMessage, storeMessages } from "../messages/store.ts";

/**
 * Turns a stored inbound webhook message into its final record, in one transaction: the contact
 * (resolved from the author's phone and user id by src/contacts/identity.ts, the one rule: found,
 * created, taught what is new, or merged; a provider's user_changed_number / user_changed_user_id
 * applied), named from the profile, the contact's 24-hour window, the
 * message as history and feed show it, the conversation summary, and the feed hand-off
 * (DESIGN §6 step 1); a STOP or START keyword opts the contact out or back in (DESIGN §13,
 * src/contacts/opt-out.ts). Finalizing twice changes nothing.
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
 * When the customer wrote, as history orders it. The provider's timestamp is whole seconds, and the
 * message was written at or after it and before we finalize it: the latest instant both allow. A
 * reply in the same second as the send it answers then sorts after that send (whose time has
 * milliseconds), and `created` (whole seconds) stays the provider's.
 */
function writtenAt(providerTime: Date, now: Date): Date {
  const secondEnd = providerTime.getTime() + 999;
  return new Date(Math.max(providerTime.getTime(), Math.min(now.getTime(), secondEnd)));
}

/**
 * The one implementation, for events the caller has locked and found unfinalized: the messages as
 * the channel reads them, written by the one message writer (contacts with their windows, messages,
 * conversation summaries, feed hand-off), then the events' finalized marks.
 */
async function finalizeEvents(trx: Db, clock: Clock, rows: readonly EventRow[]): Promise<BatchOutcome[]> {
  const events = rows.filter((e) => !e.finalized_at);
  if (events.length === 0) return [];

  // A customer's text that is an opt-out keyword (or START), by the message's index in the batch.
  const keywords = new Map<number, { change: OptOutChange; at: Date }>();
  const now = clock.now();
  const received = events.map((event) => readInboundEvent(event.payload));
  // Who wrote each message: one contact per person, whether the provider named them by phone, by
  // user id or both (DESIGN §14); a message without a phone is stored like any other.
  const contactIds = await resolveIdentities(
    trx,
    events.map((event, index): IdentityInput => identityInputOf(event.tenant_id, received[index]!)),
  );
  const batch = events.map((event, index): NewMessage => {
    const message = received[index]!;
    // The provider's time dates the window and an opt-out; history orders by createdAt.
    const sentAt = message.sentAt ?? now;
    const createdAt = message.sentAt ? writtenAt(message.sentAt, now) : sentAt;
    const keyword = message.system || message.type !== "text" ? undefined : optOutKeyword(message.text);
    if (keyword) keywords.set(index, { change: keyword, at: sentAt });
    return {
      id: newId("msg"),
      tenantId: event.tenant_id,
      senderId: event.sender_id,
      direction: "inbound",
      contactId: contactIds[index],
      phone: null,
      // Named by the identity resolution (a contact without a name takes the profile's).
      contactName: null,
      // The window moves by the newest non-system provider timestamp, never backwards.
      windowFrom: message.system ? null : sentAt,
      type: message.type,
      preview: message.preview,
      text: message.text,
      mediaType: message.mediaType,
      mediaFilename: message.mediaFilename,
      mediaId: message.mediaId,
      status: null,
      applicationId: null,
      content: null,
      providerMessageId: event.provider_message_id,
      createdAt,
      visible: !message.system,
    };
  });
  const stored = await storeMessages(trx, batch);

  // One statement: the events' finalized marks, and the opt-outs the batch's keywords ask for
  // (DESIGN §13), the latest keyword of each contact winning (provider time, then batch order). The
  // contacts are locked already: the message writer upserted them in this transaction.
  const changes = [...keywords].flatMap(([index, { change, at }]) => {
    const row = stored[index];
    // Received messages are always written (only a send can be left out).
    return typeof row === "object" ? [{ contactId: row.contactId, change, at }] : [];
  });
  await sql`
    WITH finalized AS (
      UPDATE inbound_events AS e
      SET finalized_at = ${now}, message_id = v.message_id
      FROM unnest(${batch.map((m) => m.providerMessageId)}::text[],
                  ${batch.map((m) => m.id)}::text[]) AS v(provider_message_id, message_id)
      WHERE e.provider_message_id = v.provider_message_id
    ), latest AS (
      SELECT DISTINCT ON (contact_id) contact_id, change, at
      FROM unnest(${changes.map((c) => c.contactId)}::text[], ${changes.map((c) => c.change)}::text[],
                  ${changes.map((c) => c.at.toISOString())}::timestamptz[]) WITH ORDINALITY AS k(contact_id, change, at, n)
      ORDER BY contact_id, at DESC, n DESC
    )
    UPDATE contacts AS c
    -- Opted out from the message's time (never later than now); only a change is written, so an
    -- earlier opt-out is kept.
    SET opted_out_at = CASE WHEN l.change = 'opt_out' THEN LEAST(l.at, ${now}) END
    FROM latest l
    WHERE c.id = l.contact_id
      AND (c.opted_out_at IS NULL) = (l.change = 'opt_out')`.execute(trx);

  return batch.map((m) => ({
    providerMessageId: m.providerMessageId!,
    messageId: m.id,
    tenantId: m.tenantId,
    created: true,
    feed: m.visible,
  }));
}

/** What a received message says about its author (and, for a provider's notice, what changed). */
function identityInputOf(tenantId: string, message: ReceivedMessage): IdentityInput {
  const { identity, identityChange: change } = message;
  if (change?.kind === "user_changed_number") {
    return { tenantId, identity, change: { kind: "number", newPhone: change.newPhone } };
  }
  if (change?.kind === "user_changed_user_id") {
    return { tenantId, identity, change: { kind: "user_id", newUserId: change.newUserId } };
  }
  return { tenantId, identity };
}
