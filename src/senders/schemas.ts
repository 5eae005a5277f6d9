import { t } from "elysia";
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
  { description: "An active connected sender number." },
);

function listOf<T extends Parameters<typeof t.Array>[0]>(item: T, description: string) {
  return t.Object(
    {
      object: t.Literal("list"),
      url: t.String({ description: "The request path." }),
      has_more: t.Boolean(),
      data: t.Array(item),
    },
    { description },
  );
}

export const SenderList = listOf(SenderSchema, "The caller's active senders.");
export const TemplateList = listOf(TemplateSchema, "The sender's approved templates.");

/** SPEC §7's envelope, for the OpenAPI document; the pipeline renders it. */
export const ErrorResponse = t.Object({
  error: t.Object(
    {
      type: t.String(),
      code: t.String(),
      message: t.String(),
      param: t.Nullable(t.String()),
      request_id: t.String(),
      doc_url: t.String(),
    },
    { additionalProperties: true },
  ),
});
