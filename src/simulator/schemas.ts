import { type Static, t } from "elysia";
import { BSUID_PATTERN } from "../channel/identity.ts";

/**
 * The request schemas of the Graph routes (send, upload) and of the control API (/_sim/...), and the
 * rules about them that a schema cannot say.
 */

/** Graph send bodies are kept verbatim, so their schemas accept fields they do not name. */
export function openObject<T extends Parameters<typeof t.Object>[0]>(properties: T) {
  return t.Object(properties, { additionalProperties: true });
}

const MediaObject = openObject({
  id: t.Optional(t.String()),
  link: t.Optional(t.String()),
  filename: t.Optional(t.String()),
});

const TemplateParameter = openObject({
  type: t.String(),
  text: t.Optional(t.String()),
  image: t.Optional(MediaObject),
  video: t.Optional(MediaObject),
  document: t.Optional(MediaObject),
});
export type TemplateParameter = Static<typeof TemplateParameter>;

const TemplateComponentParameters = openObject({
  type: t.UnionEnum(["header", "body", "button"]),
  sub_type: t.Optional(t.String()),
  index: t.Optional(t.Union([t.String(), t.Integer()])),
  parameters: t.Optional(t.Array(TemplateParameter)),
});
export type TemplateComponentParameters = Static<typeof TemplateComponentParameters>;

const SendTemplate = openObject({
  name: t.String(),
  language: openObject({ code: t.String(), policy: t.Optional(t.String()) }),
  components: t.Optional(t.Array(TemplateComponentParameters)),
});
export type SendTemplate = Static<typeof SendTemplate>;

export const SendBody = openObject({
  messaging_product: t.Literal("whatsapp"),
  recipient_type: t.Optional(t.Literal("individual")),
  // A phone in `to`, or a BSUID in `recipient` (send-checks.ts: exactly one).
  to: t.Optional(t.String()),
  recipient: t.Optional(t.String()),
  // Graph's default type is text.
  type: t.Optional(t.String()),
  text: t.Optional(openObject({ body: t.String(), preview_url: t.Optional(t.Boolean()) })),
  template: t.Optional(SendTemplate),
  // Echoed in this send's status webhooks, as Graph does.
  biz_opaque_callback_data: t.Optional(t.String({ maxLength: 512 })),
});
export type SendBody = Static<typeof SendBody>;

export const GraphVersionParams = {
  version: t.String({ pattern: "^v[0-9]+\\.[0-9]+$" }),
};

export const UploadBody = openObject({
  messaging_product: t.Literal("whatsapp"),
  type: t.String(),
  file: t.File(),
});

// What Graph accepts for upload, with its size limit per type.
const MB = 1024 * 1024;
export const UPLOAD_LIMITS: Record<string, number> = {
  "image/jpeg": 5 * MB,
  "image/png": 5 * MB,
  "video/mp4": 16 * MB,
  "video/3gpp": 16 * MB,
  "audio/aac": 16 * MB,
  "audio/amr": 16 * MB,
  "audio/mpeg": 16 * MB,
  "audio/mp4": 16 * MB,
  "audio/ogg": 16 * MB,
  "application/pdf": 100 * MB,
  "text/plain": 100 * MB,
};

/** A given file: up to 20 MB, so a download over the gateway's 16 MB cap can be tried. */
const MEDIA_BASE64_MAX_CHARS = Math.ceil((20 * MB) / 3) * 4;

const Phone = (description: string) => t.String({ pattern: "^\\+?[0-9]{7,15}$", description });
const Bsuid = (description: string) => t.String({ pattern: BSUID_PATTERN, description });

export const InboundRequest = t.Object({
  phone_number_id: t.String({ minLength: 1 }),
  // At least one of from and user_id (users.ts inboundAuthor).
  from: t.Optional(Phone("the customer's number")),
  user_id: t.Optional(Bsuid("the customer's BSUID; default derived from the number")),
  username: t.Optional(t.String({ maxLength: 35, description: 'the customer\'s username; "" drops it' })),
  hide_phone: t.Optional(t.Boolean({ description: "the customer withholds the number (remembered)" })),
  type: t.UnionEnum(["text", "image", "video", "document", "audio", "system"]),
  text: t.Optional(t.String()),
  caption: t.Optional(t.String()),
  filename: t.Optional(t.String({ minLength: 1 })),
  media_base64: t.Optional(
    t.String({ maxLength: MEDIA_BASE64_MAX_CHARS, description: "the file's bytes; default a sample file" }),
  ),
  mime_type: t.Optional(t.String({ pattern: "^[a-z]+/[a-zA-Z0-9.+-]+(; ?[a-z]+=[a-zA-Z0-9.+-]+)?$" })),
  timestamp: t.Optional(t.Integer({ minimum: 0 })),
  name: t.Optional(t.String()),
  id: t.Optional(t.String({ minLength: 1 })),
  new_wa_id: t.Optional(t.String({ pattern: "^[0-9]{7,15}$" })),
  waba_id: t.Optional(t.String({ minLength: 1 })),
  display_phone_number: t.Optional(t.String({ minLength: 1 })),
});
export type InboundRequest = Static<typeof InboundRequest>;

export const StatusRequest = t.Object({
  wamid: t.String({ minLength: 1 }),
  status: t.UnionEnum(["sent", "delivered", "read", "failed"]),
  phone_number_id: t.Optional(t.String({ minLength: 1 })),
  recipient_id: t.Optional(t.String({ minLength: 1 })),
  recipient_user_id: t.Optional(Bsuid("the recipient's BSUID")),
  timestamp: t.Optional(t.Integer({ minimum: 0 })),
  errors: t.Optional(
    t.Array(
      t.Object({
        code: t.Integer(),
        title: t.Optional(t.String()),
        message: t.Optional(t.String()),
        details: t.Optional(t.String()),
      }),
      { minItems: 1 },
    ),
  ),
  waba_id: t.Optional(t.String({ minLength: 1 })),
  display_phone_number: t.Optional(t.String({ minLength: 1 })),
});
export type StatusRequest = Static<typeof StatusRequest>;

/** What both user-change calls take besides the change itself: the sender, and the webhook's envelope. */
const userChangeFields = () => ({
  phone_number_id: t.String({ minLength: 1 }),
  name: t.Optional(t.String()),
  waba_id: t.Optional(t.String({ minLength: 1 })),
  display_phone_number: t.Optional(t.String({ minLength: 1 })),
});

export const ChangeNumberRequest = t.Object({
  ...userChangeFields(),
  user_id: Bsuid("the user whose number changes"),
  new_phone: Phone("the user's new number"),
});
export type ChangeNumberRequest = Static<typeof ChangeNumberRequest>;

export const ChangeUserIdRequest = t.Object({
  ...userChangeFields(),
  user_id: Bsuid("the user's BSUID until now"),
  new_user_id: Bsuid("the user's new BSUID"),
});
export type ChangeUserIdRequest = Static<typeof ChangeUserIdRequest>;

export const FailNextRequest = t.Object({
  count: t.Integer({ minimum: 1, maximum: 10_000 }),
  code: t.Integer({ minimum: 1 }),
});

export const MpsRequest = t.Object({
  mps: t.Integer({ minimum: 0, maximum: 1_000_000, description: "0: unlimited" }),
});

export const SlowNextRequest = t.Object({
  count: t.Integer({ minimum: 1, maximum: 10_000 }),
  delay_ms: t.Integer({ minimum: 1, maximum: 120_000 }),
});

// Which control fields each inbound type takes, and the media it carries.
export const INBOUND_FIELDS: Record<InboundRequest["type"], { allowed: string[] }> = {
  text: { allowed: ["text"] },
  system: { allowed: ["text", "new_wa_id"] },
  image: { allowed: ["caption", "media_base64", "mime_type"] },
  video: { allowed: ["caption", "media_base64", "mime_type"] },
  audio: { allowed: ["media_base64", "mime_type"] },
  document: { allowed: ["caption", "filename", "media_base64", "mime_type"] },
};
export const TYPE_SPECIFIC_FIELDS = [
  "text",
  "caption",
  "filename",
  "new_wa_id",
  "media_base64",
  "mime_type",
] as const;
