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

    const message = event.payload.message as unknown as CloudMessage;
    const profileName =
      (event.payload.contact as { profile?: { name?: string } } | null)?.profile?.name ?? null;
    const phone = toE164(message.from) ?? `+${message.from.replace(/\D/g, "")}`;
    const seconds = Number(message.timestamp);
    const sentAt = Number.isFinite(seconds) && seconds > 0 ? new Date(seconds * 1000) : clock.now();
    const record = describeInbound(message);
    const system = isSystemType(record.type);

    // The window moves by the provider's timestamp, and never backwards (out-of-order delivery).
    const contact = await trx
      .insertInto("contacts")
      .values({
        id: newId("ctc"),
        tenant_id: event.tenant_id,
        phone,
        name: profileName,
        last_inbound_at: system ? null : sentAt,
      })
      .onConflict((oc) =>
        oc.columns(["tenant_id", "channel", "phone"]).doUpdateSet({
          name: sql`COALESCE(contacts.name, excluded.name)`,
          last_inbound_at: system
            ? sql`contacts.last_inbound_at`
            : sql`GREATEST(contacts.last_inbound_at, excluded.last_inbound_at)`,
        }),
      )
      .returning(["id"])
      .executeTakeFirstOrThrow();

    const messageId = newId("msg");
    const inserted = await trx
      .insertInto("messages")
      .values({
        id: messageId,
        tenant_id: event.tenant_id,
        contact_id: contact.id,
        sender_id: event.sender_id,
        direction: "inbound",
        type: record.type,
        preview: record.preview,
        text: record.text,
        media_type: record.mediaType,
        media_filename: record.mediaFilename,
        status: null,
        provider_message_id: providerMessageId,
        created_at: sentAt,
      })
      .returning(["seq"])
      .executeTakeFirstOrThrow();

    if (!system) {
      await touchConversations(trx, [
        {
          contactId: contact.id,
          tenantId: event.tenant_id,
          messageSeq: inserted.seq,
          messageAt: sentAt,
          direction: "inbound",
        },
      ]);
      await trx
        .insertInto("feed_pending")
        .values({ message_id: messageId, tenant_id: event.tenant_id })
        .execute();
    }

    await trx
      .updateTable("inbound_events")
      .set({ finalized_at: clock.now(), message_id: messageId })
      .where("provider_message_id", "=", providerMessageId)
      .execute();
    return { messageId, tenantId: event.tenant_id, created: true, feed: !system };
  });
}
