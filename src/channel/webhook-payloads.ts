/**
 * The WhatsApp Cloud API webhook body (`field: "messages"`), as the provider posts it to
 * /webhooks/whatsapp and as the simulator builds it. Timestamps are epoch seconds in strings.
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
  profile: { name: string };
  /** The customer's WhatsApp id: their number, digits only. */
  wa_id: string;
}

interface InboundBase {
  /** The customer's wa_id. */
  from: string;
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

/** A change on the customer's side, e.g. `customer_changed_number` (then `new_wa_id` is the new number). */
export interface InboundSystem {
  body: string;
  type: string;
  new_wa_id?: string;
}

export type DeliveryStatus = "sent" | "delivered" | "read" | "failed";

export interface StatusUpdate {
  /** The `wamid.` the send answered with. */
  id: string;
  status: DeliveryStatus;
  timestamp: string;
  recipient_id: string;
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

/** Epoch seconds as the webhook writes them. */
export function webhookTimestamp(date: Date = new Date()): string {
  return String(Math.floor(date.getTime() / 1000));
}
