import { sql } from "kysely";
import type { Clock } from "../clock.ts";
import { toE164 } from "../contacts/phone.ts";
import { touchConversations } from "../conversations/summary.ts";
import type { Db } from "../db/connect.ts";
import { newId } from "../ids.ts";

/**
 * Turns a stored inbound webhook message into its final record, in one transaction: the contact
 * (upserted by tenant and phone, named from the profile), the contact's 24-hour window, the
 * message as history and feed show it, the conversation summary, and the feed hand-off
 * (DESIGN §6 step 1). Finalizing twice changes nothing.
 */

interface CloudMessage {
  id: string;
  from: string;
  timestamp?: string;
  type?: string;
  text?: { body?: string };
  image?: CloudMedia;
  video?: CloudMedia;
  audio?: CloudMedia;
  document?: CloudMedia;
  sticker?: CloudMedia;
  system?: { body?: string; type?: string };
  button?: { text?: string; payload?: string };
  interactive?: { button_reply?: { title?: string }; list_reply?: { title?: string } };
  location?: { latitude?: number; longitude?: number; name?: string; address?: string };
  reaction?: { emoji?: string };
}

interface CloudMedia {
  id?: string;
  mime_type?: string;
  caption?: string;
  filename?: string;
}

export interface InboundRecord {
  type: string;
  preview: string;
  text: string | null;
  mediaType: string | null;
  mediaFilename: string | null;
}

const MEDIA_TYPES = ["image", "video", "audio", "document"] as const;

const EXTENSIONS: Record<string, string> = {
  "image/jpeg": "jpg",
  "image/png": "png",
  "image/webp": "webp",
  "video/mp4": "mp4",
  "video/3gpp": "3gp",
  "audio/ogg": "ogg",
  "audio/mpeg": "mp3",
  "audio/aac": "aac",
  "audio/mp4": "m4a",
  "application/pdf": "pdf",
};

/** SPEC §2 HistoryMessage fields for one Cloud API message object. */
export function describeInbound(message: CloudMessage): InboundRecord {
  const kind = message.type ?? "unknown";
  if (kind === "text") {
    const body = message.text?.body ?? "";
    return {
      type: "text",
      preview: body,
      text: body === "" ? null : body,
      mediaType: null,
      mediaFilename: null,
    };
  }
  const mediaKind = kind === "sticker" ? "image" : kind;
  if ((MEDIA_TYPES as readonly string[]).includes(mediaKind)) {
    const media = (message[kind as keyof CloudMessage] ?? {}) as CloudMedia;
    const filename = media.filename ?? null;
    // The placeholder names something even when the customer's file had no name.
    const shownName = filename ?? `${mediaKind}.${EXTENSIONS[media.mime_type ?? ""] ?? "bin"}`;
    return {
      type: mediaKind,
      preview: `[${mediaKind}: ${shownName}]`,
      text: media.caption ? media.caption : null,
      mediaType: mediaKind,
      mediaFilename: filename,
    };
  }
  if (kind === "button" || kind === "interactive") {
    const title =
      message.button?.text ??
      message.interactive?.button_reply?.title ??
      message.interactive?.list_reply?.title ??
      "";
    return { type: "text", preview: title, text: title || null, mediaType: null, mediaFilename: null };
  }
  if (kind === "location") {
    const l = message.location ?? {};
    const place = [l.name, l.address].filter(Boolean).join(", ");
    const body = `${place ? `${place} ` : ""}(${l.latitude}, ${l.longitude})`;
    return { type: "text", preview: `[location: ${body}]`, text: body, mediaType: null, mediaFilename: null };
  }
  // system, reaction, unsupported...: kept in history as system_<kind>, never in the feed.
  const subtype = kind === "system" ? (message.system?.type ?? "notice") : kind;
  const body = message.system?.body ?? (message.reaction?.emoji ? `reacted ${message.reaction.emoji}` : null);
  return {
    type: `system_${subtype.replace(/[^a-z0-9_]/gi, "_").toLowerCase()}`,
    preview: body ?? `[${kind}]`,
    text: body,
    mediaType: null,
    mediaFilename: null,
  };
}

export function isSystemType(type: string): boolean {
  return type.startsWith("system_");
}

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
 * The one implementation: contacts (one multi-row upsert), messages (one multi-row insert),
 * conversation summaries, the feed hand-off and the events' finalized marks, for events the
 * caller has locked and found unfinalized.
 */
async function finalizeEvents(trx: Db, clock: Clock, rows: readonly EventRow[]): Promise<BatchOutcome[]> {
  const events = rows.filter((e) => !e.finalized_at);
  if (events.length === 0) return [];

  const described = events.map((event) => {
    const message = event.payload.message as unknown as CloudMessage;
    const profileName =
      (event.payload.contact as { profile?: { name?: string } } | null)?.profile?.name ?? null;
    const phone = toE164(message.from) ?? `+${message.from.replace(/\D/g, "")}`;
    const seconds = Number(message.timestamp);
    const sentAt = Number.isFinite(seconds) && seconds > 0 ? new Date(seconds * 1000) : clock.now();
    const record = describeInbound(message);
    return {
      event,
      profileName,
      phone,
      sentAt,
      record,
      system: isSystemType(record.type),
      contactKey: `${event.tenant_id}\u0000${phone}`,
      messageId: newId("msg"),
    };
  });

  // One row per (tenant, phone): a statement may not update a row twice. The name is the first
  // one the batch brings (what finalizing one by one keeps); the window moves by the newest
  // non-system provider timestamp, and never backwards (out-of-order delivery).
  const contactRows = new Map<
    string,
    { id: string; tenant_id: string; phone: string; name: string | null; last_inbound_at: Date | null }
  >();
  for (const d of described) {
    const row = contactRows.get(d.contactKey) ?? {
      id: newId("ctc"),
      tenant_id: d.event.tenant_id,
      phone: d.phone,
      name: null,
      last_inbound_at: null,
    };
    row.name ??= d.profileName;
    if (!d.system && (!row.last_inbound_at || d.sentAt > row.last_inbound_at)) row.last_inbound_at = d.sentAt;
    contactRows.set(d.contactKey, row);
  }
  // Sorted, so concurrent batches lock contact rows in one order.
  const sortedContacts = [...contactRows.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([, row]) => row);
  const contacts = await trx
    .insertInto("contacts")
    .values(sortedContacts)
    .onConflict((oc) =>
      oc.columns(["tenant_id", "channel", "phone"]).doUpdateSet({
        name: sql`COALESCE(contacts.name, excluded.name)`,
        // GREATEST ignores NULL: a batch of only system messages leaves the window where it was.
        last_inbound_at: sql`GREATEST(contacts.last_inbound_at, excluded.last_inbound_at)`,
      }),
    )
    .returning(["id", "tenant_id", "phone"])
    .execute();
  const contactIdByKey = new Map(contacts.map((c) => [`${c.tenant_id}\u0000${c.phone}`, c.id]));
  const contactIdOf = (key: string) => {
    const id = contactIdByKey.get(key);
    if (!id) throw new Error("finalize: contact upsert returned no row");
    return id;
  };

  const inserted = await trx
    .insertInto("messages")
    .values(
      described.map((d) => ({
        id: d.messageId,
        tenant_id: d.event.tenant_id,
        contact_id: contactIdOf(d.contactKey),
        sender_id: d.event.sender_id,
        direction: "inbound" as const,
        type: d.record.type,
        preview: d.record.preview,
        text: d.record.text,
        media_type: d.record.mediaType,
        media_filename: d.record.mediaFilename,
        status: null,
        provider_message_id: d.event.provider_message_id,
        created_at: d.sentAt,
      })),
    )
    .returning(["id", "seq"])
    .execute();
  const seqById = new Map(inserted.map((m) => [m.id as string, m.seq]));

  const visible = described.filter((d) => !d.system);
  if (visible.length > 0) {
    await touchConversations(
      trx,
      visible.map((d) => {
        const seq = seqById.get(d.messageId);
        if (seq === undefined) throw new Error("finalize: message insert returned no row");
        return {
          contactId: contactIdOf(d.contactKey),
          tenantId: d.event.tenant_id,
          messageSeq: Number(seq),
          messageAt: d.sentAt,
          direction: "inbound" as const,
        };
      }),
    );
    await trx
      .insertInto("feed_pending")
      .values(visible.map((d) => ({ message_id: d.messageId, tenant_id: d.event.tenant_id })))
      .execute();
  }

  await sql`
    UPDATE inbound_events AS e
    SET finalized_at = ${clock.now()}, message_id = v.message_id
    FROM unnest(${described.map((d) => d.event.provider_message_id)}::text[],
                ${described.map((d) => d.messageId)}::text[]) AS v(provider_message_id, message_id)
    WHERE e.provider_message_id = v.provider_message_id`.execute(trx);

  return described.map((d) => ({
    providerMessageId: d.event.provider_message_id,
    messageId: d.messageId,
    tenantId: d.event.tenant_id,
    created: true,
    feed: !d.system,
  }));
}
