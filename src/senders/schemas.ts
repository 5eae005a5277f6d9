import { t } from "elysia";
import { listOf } from "../http/schemas.ts";
import { TemplateSchema } from "../templates/schemas.ts";

export const SenderIdParams = t.Object({
  sender_id: t.String({ pattern: "^snd_[0-9A-Za-z]{1,64}$", description: "a `snd_` id" }),
});

export const SenderSchema = t.Object(
  {
    object: t.Literal("sender"),
    id: t.String({ description: "`snd_` id." }),
    channel: t.String({ description: "Channel name, `whatsapp`." }),
    name: t.Nullable(t.String()),
    phone_number: t.Nullable(t.String({ description: "E.164." })),
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
      },
    ],
  },
);

export const SenderList = listOf(SenderSchema, "The caller's active senders.");
export const TemplateList = listOf(TemplateSchema, "The sender's approved templates.");
