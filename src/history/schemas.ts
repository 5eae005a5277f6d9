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
  {
    title: "MessageMedia",
    description: "The attachment's kind and file name; the content itself is not served.",
  },
);

export const MessageFailureSchema = t.Object(
  {
    code: t.String(),
    message: t.String(),
    retryable: t.Boolean({ description: "Whether sending the same message again may succeed." }),
  },
  {
    title: "MessageFailure",
    description: "Why a failed outbound message failed; null unless `status` is `failed`.",
  },
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
      description:
        "`scheduled` (waiting for its `send_at`), `accepted`, `sent`, `delivered`, `read`, `failed` or `canceled`; null for inbound messages.",
    }),
  ),
  failure: t.Nullable(MessageFailureSchema),
  client_reference: t.Nullable(
    t.String({
      description: "The `client_reference` the send gave; null when none (and for inbound messages).",
    }),
  ),
  // TypeBox's own Integer: Elysia's t.Integer is a coercing transform, and a transform anywhere in a
  // response schema makes Elysia re-encode the whole body (a third of a 500-message feed page).
  created: Type.Integer({ description: "Unix epoch seconds." }),
};

/** A stored message as the read endpoints show it (examples for the OpenAPI document). */
export const storedMessageExample = {
  id: "msg_8Tb4Vc6Xd8Zf0Hg2Jk4Lm6",
  direction: "inbound",
  type: "text",
  preview: "Hi, when does my parcel arrive?\nOrder A-1",
  text: "Hi, when does my parcel arrive?\nOrder A-1",
  media: null,
  status: null,
  failure: null,
  client_reference: null,
  created: 1767259800,
};

export const HistoryMessageSchema = t.Object(
  { object: t.Literal("message"), ...messageFields },
  {
    title: "HistoryMessage",
    description: "A message to or from the contact.",
    examples: [
      { object: "message", ...storedMessageExample },
      {
        object: "message",
        ...storedMessageExample,
        id: "msg_3Rt5Yu7Io9Pa1Sd3Fg5Hj7",
        direction: "outbound",
        type: "document",
        preview: "[document: invoice-A-1.pdf]",
        text: null,
        media: { type: "document", filename: "invoice-A-1.pdf" },
        status: "delivered",
        created: 1767260100,
      },
    ],
  },
);

export const HistoryList = listOf(HistoryMessageSchema, "The contact's messages, inbound and outbound.");
