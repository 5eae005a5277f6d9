import { t } from "elysia";
import { listOf } from "../http/schemas.ts";
import { TemplateSchema } from "../templates/schemas.ts";

export const SenderIdParams = t.Object({
  sender_id: t.String({ pattern: "^snd_[0-9A-Za-z]{1,64}$", description: "a `snd_` id" }),
});

export const SenderQuotaSchema = t.Object(
  {
    limit: t.Integer({ minimum: 0, description: "Messages the account may send today on this channel." }),
    used: t.Integer({
      minimum: 0,
      description: "Messages accepted today; at `limit`, sends get 429 `quota_exceeded`.",
    }),
    resets_at: t.String({ format: "date-time", description: "When the count starts again: 00:00 UTC." }),
  },
  {
    title: "SenderQuota",
    description: "The daily send quota of the sender's channel, shared by every sender of the account on it.",
  },
);

export const SenderSchema = t.Object(
  {
    object: t.Literal("sender"),
    id: t.String({ description: "`snd_` id." }),
    channel: t.String({ description: "Channel name, `whatsapp`." }),
    name: t.Nullable(t.String()),
    phone_number: t.Nullable(t.String({ description: "E.164." })),
    quota: SenderQuotaSchema,
  },
  {
    title: "Sender",
    description: "An active connected sender number.",
    examples: [
      {
        object: "sender",
        id: "snd_7Kp2Qr9sTvWx3yZa5bCdEf",
        channel: "whatsapp",
        name: "Acme Support",
        phone_number: "+4930123456789",
        quota: { limit: 1000, used: 120, resets_at: "2026-01-02T00:00:00.000Z" },
      },
    ],
  },
);

export const SenderList = listOf(SenderSchema, "The caller's active senders.");
export const TemplateList = listOf(TemplateSchema, "The sender's approved templates.");
