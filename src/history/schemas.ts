import { Type } from "@sinclair/typebox";
import { t } from "elysia";
import { listOf } from "../http/schemas.ts";
import { queryInteger } from "../http/validation.ts";

export const HISTORY_LIMIT = { minimum: 1, maximum: 200, default: 50 };

export const HistoryQuery = t.Object({
  limit: t.Optional(queryInteger("limit", HISTORY_LIMIT)),
  before: t.Optional(
    t.String({ description: "a `msg_` id of this contact; only messages older than it are listed" }),
  ),
  order: t.Optional(
    t.Union([t.Literal("asc"), t.Literal("desc")], {
      default: "asc",
      description: "`asc` oldest first (default), `desc` newest first",
    }),
  ),
});

const MessageMediaSchema = t.Object(
  {
    type: t.String({ description: "`image`, `video`, `document` or `audio`." }),
    filename: t.Nullable(t.String()),
  },
  { description: "The attachment's kind and file name; the content itself is not served." },
);

const MessageFailureSchema = t.Object(
  {
    code: t.String(),
    message: t.String(),
    retryable: t.Boolean({ description: "Whether sending the same message again may succeed." }),
  },
  { description: "Why a failed outbound message failed; null unless `status` is `failed`." },
);

/** The fields of a stored message in every view; a Conversation's `last_message` is exactly these. */
export const messageFields = {
  id: t.Nullable(
    t.String({ description: "`msg_` id; null only on old messages from before structured storage." }),
  ),
  direction: t.Union([t.Literal("inbound"), t.Literal("outbound")]),
  type: t.String({ description: "`text`, `template`, `image`, `video`, `document` or `audio`." }),
  preview: t.String({
    description:
      "Short display form: the full body for text, `[<type>: <filename>]` for media. Read `text` instead.",
  }),
  text: t.Nullable(
    t.String({
      description:
        "The full body, never truncated, line breaks kept; for media the caption. Null when there is no text.",
    }),
  ),
  media: t.Nullable(MessageMediaSchema),
  status: t.Nullable(
    t.String({
      description: "`accepted`, `sent`, `delivered`, `read` or `failed`; null for inbound messages.",
    }),
  ),
  failure: t.Nullable(MessageFailureSchema),
  // TypeBox's own Integer: Elysia's t.Integer is a coercing transform, and a transform anywhere in a
  // response schema makes Elysia re-encode the whole body (a third of a 500-message feed page).
  created: Type.Integer({ description: "Unix epoch seconds." }),
};

export const HistoryMessageSchema = t.Object(
  { object: t.Literal("message"), ...messageFields },
  { description: "A message to or from the contact." },
);

export const HistoryList = listOf(HistoryMessageSchema, "The contact's messages, inbound and outbound.");
