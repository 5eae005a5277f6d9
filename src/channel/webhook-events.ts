import type { MessageFailure } from "./failure-codes.ts";
import { isBsuid, type ProviderIdentity } from "./identity.ts";
import { normalizeProviderError } from "./provider.ts";
import { isSystemMessageType, systemMessageType } from "./system-messages.ts";
import type { DeliveryStatus } from "./webhook-payloads.ts";

/**
 * Reading what the provider's webhooks carry (webhook-payloads.ts has the shapes) into the service's
 * own terms: the only code that reads the wire format. Webhooks are untrusted input and real traffic
 * carries more than is modelled, so every field may be missing and an unknown message type is kept
 * (as a system message) rather than refused. A user is named by a phone, a BSUID or both (DESIGN
 * §14): a message from a user who withholds their phone is read like any other, never passed over.
 */

/** One change of a webhook: what it carries for one business number. */
export interface WebhookChange {
  /** The provider's id of the business number (a sender's provider_phone_number_id); "" if none. */
  phoneNumberId: string;
  received: InboundEvent[];
  statuses: StatusEvent[];
}

export interface InboundEvent {
  providerMessageId: string;
  /**
   * The message and its author's profile exactly as received (JSON): what inbound_events keeps,
   * read back by `readInboundEvent` when the message is finalized.
   */
  payload: string;
}

export interface StatusEvent {
  providerMessageId: string;
  status: DeliveryStatus;
  at: Date;
  /** The provider's errors as received (JSON), read by `statusFailure`; null when it gave none. */
  errors: string | null;
  /** What the send asked to be echoed back (our message id), capped at 512 characters. */
  clientReference: string | null;
  /** Whom the status is about: `recipient_id` (phone, when shared), `recipient_user_id`, ... */
  identity: ProviderIdentity;
}

/**
 * What a provider notice says changed about its user (`ReceivedMessage.identity`, as the business
 * knew them before the change).
 */
export type IdentityChange =
  | {
      /** The user's phone is now `newPhone`; the old one no longer names them. */
      kind: "user_changed_number";
      /** E.164 with its leading '+'. */
      newPhone: string;
      /** The BSUID after the change, when the notice gives one that differs from the old. */
      newUserId: string | null;
    }
  | {
      /** The user's BSUID is now `newUserId`; the old one (`identity.userId`) still names them. */
      kind: "user_changed_user_id";
      newUserId: string;
      newParentUserId: string | null;
    };

/** A received message as history shows it (SPEC §2 HistoryMessage fields), and who sent it. */
export interface ReceivedMessage {
  /** Who wrote it: phone (when shared), BSUID, parent BSUID, username, profile name. */
  identity: ProviderIdentity;
  /**
   * @deprecated read `identity.phone`. The customer's number, digits only, as the provider names
   * it; "" when they withhold it.
   */
  from: string;
  profileName: string | null;
  /** Set on the provider's notices of a changed number or BSUID (system messages). */
  identityChange: IdentityChange | null;
  /** The provider's time of the message; undefined when it gave none that is usable. */
  sentAt: Date | undefined;
  type: string;
  preview: string;
  text: string | null;
  mediaType: string | null;
  mediaFilename: string | null;
  /** The provider's id of the media (what `ChannelProvider.downloadMedia` fetches); null without. */
  mediaId: string | null;
  /**
   * A provider notice (system_<kind>, `isSystemMessageType`): stored, but left out of history, the
   * feed and the conversation, and it opens no window.
   */
  system: boolean;
}

/** What a parser may find in a message object: anything, or nothing. */
interface WireMessage {
  id?: unknown;
  from?: unknown;
  from_user_id?: unknown;
  timestamp?: string;
  type?: string;
  text?: { body?: string };
  image?: WireMedia;
  video?: WireMedia;
  audio?: WireMedia;
  document?: WireMedia;
  sticker?: WireMedia;
  system?: WireSystem;
  button?: { text?: string; payload?: string };
  interactive?: { button_reply?: { title?: string }; list_reply?: { title?: string } };
  location?: { latitude?: number; longitude?: number; name?: string; address?: string };
  reaction?: { emoji?: string };
}

interface WireMedia {
  id?: string;
  mime_type?: string;
  caption?: string;
  filename?: string;
}

interface WireSystem {
  body?: string;
  type?: string;
  /** user_changed_number: the new phone (customer_changed_number, before 2026: `new_wa_id`). */
  wa_id?: unknown;
  new_wa_id?: unknown;
  /** The BSUID (and parent BSUID) after the change. */
  user_id?: unknown;
  parent_user_id?: unknown;
  previous_user_id?: unknown;
  previous_parent_user_id?: unknown;
}

interface WireContact {
  wa_id?: unknown;
  user_id?: unknown;
  parent_user_id?: unknown;
  profile?: { name?: unknown; username?: unknown };
}

interface WireStatus {
  id?: unknown;
  status?: unknown;
  recipient_id?: unknown;
  recipient_user_id?: unknown;
  recipient_parent_user_id?: unknown;
  timestamp?: string;
  errors?: unknown;
  biz_opaque_callback_data?: unknown;
}

interface WireValue {
  metadata?: { phone_number_id?: string };
  contacts?: WireContact[];
  messages?: WireMessage[];
  statuses?: WireStatus[];
}

interface WireBody {
  object?: string;
  entry?: { changes?: { field?: string; value?: WireValue }[] }[];
}

/** What inbound_events.payload holds. */
interface StoredInbound {
  message: WireMessage;
  contact: WireContact | null;
}

const STATUS_VALUES = new Set<unknown>(["sent", "delivered", "read", "failed"] satisfies DeliveryStatus[]);

/** Epoch seconds in a string (the wire's timestamps); undefined when not a positive number. */
function dateOf(seconds: string | undefined): Date | undefined {
  const value = Number(seconds);
  return Number.isFinite(value) && value > 0 ? new Date(value * 1000) : undefined;
}

/**
 * The `messages` changes of a webhook body; anything else carries nothing to store. A message
 * without an id or an author, or a status without an id or a known status, is passed over.
 */
export function parseWebhook(body: unknown): WebhookChange[] {
  const payload = body as WireBody;
  if (payload?.object !== "whatsapp_business_account" || !Array.isArray(payload.entry)) return [];
  return payload.entry.flatMap((entry) =>
    (entry?.changes ?? [])
      .filter((c) => c?.field === "messages" && c.value)
      .map((c) => changeOf(c.value as WireValue)),
  );
}

function changeOf(value: WireValue): WebhookChange {
  const contacts = Array.isArray(value.contacts) ? value.contacts : [];
  const received: InboundEvent[] = [];
  for (const message of value.messages ?? []) {
    if (typeof message?.id !== "string") continue;
    const contact = authorContact(contacts, message);
    // Only a message that names nobody at all is passed over: a phone or a BSUID is an author.
    const author = identityOf(message, contact);
    if (author.phone === null && author.userId === null) continue;
    received.push({
      providerMessageId: message.id,
      payload: JSON.stringify({ message, contact } satisfies StoredInbound),
    });
  }
  const statuses: StatusEvent[] = [];
  for (const status of value.statuses ?? []) {
    if (typeof status?.id !== "string" || !STATUS_VALUES.has(status.status)) continue;
    statuses.push({
      providerMessageId: status.id,
      status: status.status as DeliveryStatus,
      at: dateOf(status.timestamp) ?? new Date(),
      errors: Array.isArray(status.errors) ? JSON.stringify(status.errors) : null,
      clientReference:
        typeof status.biz_opaque_callback_data === "string"
          ? status.biz_opaque_callback_data.slice(0, 512)
          : null,
      identity: recipientOf(status, contacts),
    });
  }
  return { phoneNumberId: value.metadata?.phone_number_id ?? "", received, statuses };
}

/** The `contacts[]` entry of a message's author: by phone, else by BSUID, else the first. */
function authorContact(contacts: WireContact[], message: WireMessage): WireContact | null {
  return (
    (typeof message.from === "string" ? contacts.find((c) => c?.wa_id === message.from) : undefined) ??
    (isBsuid(message.from_user_id) ? contacts.find((c) => c?.user_id === message.from_user_id) : undefined) ??
    contacts[0] ??
    null
  );
}

/** A phone as the wire gives it (digits), in E.164 with its '+'; null when there is none. */
function phoneOf(value: unknown): string | null {
  const digits = typeof value === "string" ? value.replace(/\D/g, "") : "";
  return digits === "" ? null : `+${digits}`;
}

function bsuidOf(...values: unknown[]): string | null {
  return (values.find(isBsuid) as string | undefined) ?? null;
}

function textOf(value: unknown): string | null {
  return typeof value === "string" && value !== "" ? value : null;
}

/**
 * Who wrote a message. A notice of a changed number or BSUID names the user as the business knew
 * them (`previous_user_id`), whatever the new values are.
 */
function identityOf(message: WireMessage, contact: WireContact | null): ProviderIdentity {
  const system = message.type === "system" ? message.system : undefined;
  return {
    phone: phoneOf(message.from) ?? phoneOf(contact?.wa_id),
    userId: bsuidOf(system?.previous_user_id, message.from_user_id, contact?.user_id),
    parentUserId: bsuidOf(system?.previous_parent_user_id, contact?.parent_user_id),
    username: textOf(contact?.profile?.username),
    name: textOf(contact?.profile?.name),
  };
}

/** Whom a status is about; the username and name come from the status's `contacts[]`, if any. */
function recipientOf(status: WireStatus, contacts: WireContact[]): ProviderIdentity {
  const userId = bsuidOf(status.recipient_user_id);
  const phone = phoneOf(status.recipient_id);
  const contact =
    contacts.find((c) => userId !== null && c?.user_id === userId) ??
    contacts.find((c) => phone !== null && phoneOf(c?.wa_id) === phone);
  return {
    phone: phone ?? phoneOf(contact?.wa_id),
    userId: userId ?? bsuidOf(contact?.user_id),
    parentUserId: bsuidOf(status.recipient_parent_user_id, contact?.parent_user_id),
    username: textOf(contact?.profile?.username),
    name: textOf(contact?.profile?.name),
  };
}

/** What a system message says changed about its user; null for any other message. */
function identityChangeOf(message: WireMessage, identity: ProviderIdentity): IdentityChange | null {
  const system = message.type === "system" ? message.system : undefined;
  if (system?.type === "user_changed_number" || system?.type === "customer_changed_number") {
    const newPhone = phoneOf(system.wa_id) ?? phoneOf(system.new_wa_id);
    if (newPhone === null) return null;
    const newUserId = bsuidOf(system.user_id);
    return {
      kind: "user_changed_number",
      newPhone,
      newUserId: newUserId === identity.userId ? null : newUserId,
    };
  }
  if (system?.type === "user_changed_user_id") {
    const newUserId = bsuidOf(system.user_id);
    if (newUserId === null || newUserId === identity.userId) return null;
    return { kind: "user_changed_user_id", newUserId, newParentUserId: bsuidOf(system.parent_user_id) };
  }
  return null;
}

/** A stored inbound event (InboundEvent.payload, parsed) as the message history keeps it. */
export function readInboundEvent(payload: unknown): ReceivedMessage {
  const { message, contact } = payload as StoredInbound;
  const record = describeInbound(message);
  const identity = identityOf(message, contact);
  return {
    identity,
    from: typeof message.from === "string" ? message.from : "",
    profileName: typeof contact?.profile?.name === "string" ? contact.profile.name : null,
    identityChange: identityChangeOf(message, identity),
    sentAt: dateOf(message.timestamp),
    ...record,
    system: isSystemMessageType(record.type),
  };
}

const MEDIA_TYPES = ["image", "video", "audio", "document"] as const;

const EXTENSIONS: Record<string, string> = {
  "image/jpeg": "jpg",
  "image/png": "png",
  "image/webp": "webp",
  "image/gif": "gif",
  "video/mp4": "mp4",
  "video/3gpp": "3gp",
  "audio/ogg": "ogg",
  "audio/mpeg": "mp3",
  "audio/aac": "aac",
  "audio/mp4": "m4a",
  "application/pdf": "pdf",
};

/** The usual file extension of a MIME type (parameters ignored); `bin` when it is not one we know. */
export function mediaExtension(mimeType: string | null | undefined): string {
  return EXTENSIONS[(mimeType ?? "").split(";")[0]!.trim().toLowerCase()] ?? "bin";
}

type Described = Pick<
  ReceivedMessage,
  "type" | "preview" | "text" | "mediaType" | "mediaFilename" | "mediaId"
>;

/** SPEC §2 HistoryMessage fields for one Cloud API message object. */
function describeInbound(message: WireMessage): Described {
  const kind = message.type ?? "unknown";
  if (kind === "text") {
    const body = message.text?.body ?? "";
    return {
      type: "text",
      preview: body,
      text: body === "" ? null : body,
      mediaType: null,
      mediaFilename: null,
      mediaId: null,
    };
  }
  const mediaKind = kind === "sticker" ? "image" : kind;
  if ((MEDIA_TYPES as readonly string[]).includes(mediaKind)) {
    const media = (message[kind as keyof WireMessage] ?? {}) as WireMedia;
    const filename = media.filename ?? null;
    // The placeholder names something even when the customer's file had no name.
    const shownName = filename ?? `${mediaKind}.${mediaExtension(media.mime_type)}`;
    return {
      type: mediaKind,
      preview: `[${mediaKind}: ${shownName}]`,
      text: media.caption ? media.caption : null,
      mediaType: mediaKind,
      mediaFilename: filename,
      // Only a usable id: anything else leaves the message without a way to fetch its media.
      mediaId: typeof media.id === "string" && media.id !== "" ? media.id.slice(0, 256) : null,
    };
  }
  if (kind === "button" || kind === "interactive") {
    const title =
      message.button?.text ??
      message.interactive?.button_reply?.title ??
      message.interactive?.list_reply?.title ??
      "";
    return {
      type: "text",
      preview: title,
      text: title || null,
      mediaType: null,
      mediaFilename: null,
      mediaId: null,
    };
  }
  if (kind === "location") {
    const l = message.location ?? {};
    const place = [l.name, l.address].filter(Boolean).join(", ");
    const body = `${place ? `${place} ` : ""}(${l.latitude}, ${l.longitude})`;
    return {
      type: "text",
      preview: `[location: ${body}]`,
      text: body,
      mediaType: null,
      mediaFilename: null,
      mediaId: null,
    };
  }
  // system, reaction, unsupported...: a provider notice, stored as system_<kind>.
  const subtype = kind === "system" ? (message.system?.type ?? "notice") : kind;
  const body = message.system?.body ?? (message.reaction?.emoji ? `reacted ${message.reaction.emoji}` : null);
  return {
    type: systemMessageType(subtype),
    preview: body ?? `[${kind}]`,
    text: body,
    mediaType: null,
    mediaFilename: null,
    mediaId: null,
  };
}

interface WireStatusError {
  code?: number | string;
  title?: string;
  message?: string;
  error_data?: { details?: string };
}

/** A `failed` status's errors (StatusEvent.errors, parsed) as the message's failure. */
export function statusFailure(errors: unknown): MessageFailure {
  const first = ((Array.isArray(errors) ? errors[0] : undefined) ?? {}) as WireStatusError;
  const detail =
    first.error_data?.details ?? first.message ?? first.title ?? "The provider reported a failure.";
  const normalized = normalizeProviderError(
    first.code === undefined ? undefined : Number(first.code),
    detail,
  );
  return { code: normalized.code, message: normalized.message, retryable: normalized.retryable };
}
