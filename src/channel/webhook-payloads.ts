/**
 * The WhatsApp Cloud API webhook body (`field: "messages"`), as the provider posts it to
 * /webhooks/whatsapp and as the simulator builds it. Timestamps are epoch seconds in strings.
 * Since 2026 (DESIGN §14) every user is named by a business-scoped user id (`user_id`), and the
 * phone (`wa_id`, `from`, `recipient_id`) only when the user shares it.
 * Real traffic also carries message types not modelled here (sticker, location, reaction,
 * interactive, unsupported, ...): a parser must tolerate a `type` it does not know. The service
 * reads them only through webhook-events.ts.
 */

export interface WebhookBody {
  object: "whatsapp_business_account";
  entry: WebhookEntry[];
}

export interface WebhookEntry {
  /** The WhatsApp Business Account id. */
  id: string;
  changes: WebhookChange[];
}

export interface WebhookChange {
  field: "messages";
  value: WebhookValue;
}

export interface WebhookValue {
  messaging_product: "whatsapp";
  metadata: WebhookMetadata;
  contacts?: WebhookContact[];
  messages?: InboundMessage[];
  statuses?: StatusUpdate[];
}

export interface WebhookMetadata {
  /** The business number, digits only. */
  display_phone_number: string;
  phone_number_id: string;
}

export interface WebhookContact {
  /** `username` when the user adopted one. */
  profile: { name: string; username?: string };
  /** The customer's WhatsApp id: their number, digits only; absent when they withhold it. */
  wa_id?: string;
  /** The customer's BSUID (always, since April 2026). */
  user_id?: string;
  /** Their parent BSUID, when the business has parent BSUIDs enabled. */
  parent_user_id?: string;
}

interface InboundBase {
  /** The customer's wa_id; absent when they withhold their phone. */
  from?: string;
  /** The customer's BSUID. */
  from_user_id?: string;
  /** `wamid.` id of the message. */
  id: string;
  timestamp: string;
}

export interface InboundMedia {
  /** Media id, fetchable from the provider. */
  id: string;
  mime_type: string;
  sha256: string;
}

export type InboundMessage =
  | (InboundBase & { type: "text"; text: { body: string } })
  | (InboundBase & { type: "image"; image: InboundMedia & { caption?: string } })
  | (InboundBase & { type: "video"; video: InboundMedia & { caption?: string } })
  | (InboundBase & { type: "audio"; audio: InboundMedia & { voice?: boolean } })
  | (InboundBase & { type: "document"; document: InboundMedia & { caption?: string; filename?: string } })
  | (InboundBase & { type: "system"; system: InboundSystem });

/**
 * A change on the customer's side. `user_changed_number`: `wa_id` is the new number.
 * `user_changed_user_id`: `user_id` is the new BSUID, `previous_user_id` the one it replaces (no
 * phone is included). The older `customer_changed_number` named the new number `new_wa_id`.
 */
export interface InboundSystem {
  body: string;
  type: string;
  wa_id?: string;
  new_wa_id?: string;
  user_id?: string;
  parent_user_id?: string;
  previous_user_id?: string;
  previous_parent_user_id?: string;
}

export type DeliveryStatus = "sent" | "delivered" | "read" | "failed";

export interface StatusUpdate {
  /** The `wamid.` the send answered with. */
  id: string;
  status: DeliveryStatus;
  timestamp: string;
  /** The recipient's phone, digits only; absent when they withhold it. */
  recipient_id?: string;
  /** The recipient's BSUID. */
  recipient_user_id?: string;
  recipient_parent_user_id?: string;
  /** Present on `failed`. */
  errors?: StatusError[];
}

export interface StatusError {
  code: number;
  title: string;
  message: string;
  error_data: { details: string };
}

/** Where a webhook comes from: the business account and the phone number that received or sent. */
export interface WebhookAccount {
  wabaId: string;
  phoneNumberId: string;
  displayPhoneNumber: string;
}

/** One webhook carrying one change for one phone number. */
export function buildWebhook(
  account: WebhookAccount,
  content: Pick<WebhookValue, "contacts" | "messages" | "statuses">,
): WebhookBody {
  return {
    object: "whatsapp_business_account",
    entry: [
      {
        id: account.wabaId,
        changes: [
          {
            field: "messages",
            value: {
              messaging_product: "whatsapp",
              metadata: {
                display_phone_number: account.displayPhoneNumber,
                phone_number_id: account.phoneNumberId,
              },
              ...content,
            },
          },
        ],
      },
    ],
  };
}

/**
 * A user as a webhook names them: the BSUID always, the phone only when `phoneShared` (it may be
 * known and still withheld), and the parent BSUID and username when they have one.
 */
export interface WireUser {
  /** Digits only (a leading '+' is dropped). */
  phone: string | null;
  phoneShared: boolean;
  userId: string;
  parentUserId?: string | null;
  username?: string | null;
  name?: string | null;
}

function sharedPhone(user: WireUser): string | undefined {
  return user.phoneShared && user.phone ? user.phone.replace(/^\+/, "") : undefined;
}

/** The `contacts[]` entry of a user's message: profile, `wa_id` when shared, `user_id`. */
export function wireContact(user: WireUser): WebhookContact {
  const waId = sharedPhone(user);
  return {
    profile: { name: user.name ?? "", ...(user.username ? { username: user.username } : {}) },
    ...(waId ? { wa_id: waId } : {}),
    user_id: user.userId,
    ...(user.parentUserId ? { parent_user_id: user.parentUserId } : {}),
  };
}

/** Who wrote a message: `from` when the phone is shared, and `from_user_id`. */
export function wireAuthor(user: WireUser): Pick<InboundBase, "from" | "from_user_id"> {
  const waId = sharedPhone(user);
  return { ...(waId ? { from: waId } : {}), from_user_id: user.userId };
}

/** Whom a status is about: `recipient_id` when the phone is shared, and the BSUIDs. */
export function wireRecipient(
  user: WireUser,
): Pick<StatusUpdate, "recipient_id" | "recipient_user_id" | "recipient_parent_user_id"> {
  const waId = sharedPhone(user);
  return {
    ...(waId ? { recipient_id: waId } : {}),
    recipient_user_id: user.userId,
    ...(user.parentUserId ? { recipient_parent_user_id: user.parentUserId } : {}),
  };
}

/** What every message carries besides its author and content. */
export interface MessageStamp {
  /** `wamid.` id of the message. */
  id: string;
  timestamp: string;
}

/**
 * The system message of a user whose phone changed to `newPhone`: `wa_id` is the new number, `from`
 * the old one when it was shared. (System messages come without a `contacts` array.)
 */
export function userChangedNumberMessage(
  user: WireUser,
  newPhone: string,
  stamp: MessageStamp,
): InboundMessage {
  const newWaId = newPhone.replace(/^\+/, "");
  const shown = user.name || user.username || "A user";
  return {
    ...wireAuthor(user),
    ...stamp,
    type: "system",
    system: {
      body: `User ${shown} changed from ${sharedPhone(user) ?? "a withheld number"} to ${newWaId}`,
      wa_id: newWaId,
      type: "user_changed_number",
      user_id: user.userId,
      ...(user.parentUserId ? { parent_user_id: user.parentUserId } : {}),
    },
  };
}

/**
 * The system message of a user whose BSUID changed to `newUserId`: only the change is reported (no
 * phone); the message names the user by the BSUID the business knew, `previous_user_id`.
 */
export function userChangedUserIdMessage(
  user: WireUser,
  newUserId: string,
  stamp: MessageStamp,
): InboundMessage {
  const shown = user.name || user.username || "A user";
  return {
    from_user_id: user.userId,
    ...stamp,
    type: "system",
    system: {
      body: `User ${shown} changed their business-scoped user ID`,
      type: "user_changed_user_id",
      user_id: newUserId,
      previous_user_id: user.userId,
      ...(user.parentUserId ? { previous_parent_user_id: user.parentUserId } : {}),
    },
  };
}

/** Epoch seconds as the webhook writes them. */
export function webhookTimestamp(date: Date = new Date()): string {
  return String(Math.floor(date.getTime() / 1000));
}
