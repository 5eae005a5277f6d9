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
    throughput: t.Object(
      {
        mps: t.Integer({
          description: "The sender's pace: messages per second handed to the provider at most.",
        }),
        backlog: t.Integer({
          description:
            "Accepted messages not yet handed to the provider (retries included; counted up to 1,000,000).",
        }),
        estimated_drain_seconds: t.Integer({
          description: "backlog / mps, rounded up: when a send made now goes out.",
        }),
      },
      { title: "SenderThroughput", description: "Backpressure you can see before you send more." },
    ),
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
        throughput: { mps: 80, backlog: 1200, estimated_drain_seconds: 15 },
      },
    ],
  },
);

export const SenderList = listOf(SenderSchema, "The caller's active senders.");
export const TemplateList = listOf(TemplateSchema, "The sender's approved templates.");
