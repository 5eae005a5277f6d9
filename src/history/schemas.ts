import { Type } from "@sinclair/typebox";
import { t } from "elysia";
import { MESSAGE_FAILURE_CODES, MESSAGE_FAILURES } from "../channel/failure-codes.ts";
import { listOf, literalUnion } from "../http/schemas.ts";
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

/** `failure.code`: the catalogue's codes (src/channel/failure-codes.ts), each explained. */
export const MessageFailureCodeSchema = literalUnion(MESSAGE_FAILURE_CODES, {
  title: "MessageFailureCode",
  description: `Why the message failed (or why its last attempt did). Each code has its entry, with what to do, at \`{base_url}/docs#failure-<code>\`:\n${MESSAGE_FAILURE_CODES.map(
    (code) =>
      `- \`${code}\`${MESSAGE_FAILURES[code].retryable ? " (retryable)" : ""}: ${firstSentence(MESSAGE_FAILURES[code].meaning)}`,
  ).join("\n")}`,
  "x-enumDescriptions": Object.fromEntries(
    MESSAGE_FAILURE_CODES.map((code) => [code, firstSentence(MESSAGE_FAILURES[code].meaning)]),
  ),
});

function firstSentence(text: string): string {
  const end = text.search(/\.(\s|$)/);
  return end === -1 ? text : text.slice(0, end + 1);
}

export const MessageFailureSchema = t.Object(
  {
    code: MessageFailureCodeSchema,
    message: t.String({ description: "For people: what happened, with the provider's own words and code." }),
    retryable: t.Boolean({ description: "Whether sending the same message again may succeed." }),
  },
  {
    title: "MessageFailure",
    description:
      "Why a message failed: its `failure` (null unless `status` is `failed`), or, in `retrying.last_error`, why the last attempt of a message that is tried again failed.",
  },
);

/** `retrying` (issue 24): a message waiting to be tried again, and why. */
export const MessageRetryingSchema = t.Object(
  {
    // TypeBox's own Integer (see `created` below).
    attempts: Type.Integer({
      description: "Attempts made so far (throttled ones, and one under way, included).",
    }),
    next_attempt_at: t.Nullable(
      Type.Integer({
        description: "When the next attempt is due (Unix seconds); null while one is under way.",
      }),
    ),
    last_error: MessageFailureSchema,
  },
  {
    title: "MessageRetrying",
    description:
      "An `accepted` message whose last attempt failed (the provider throttled it, or failed in a way worth retrying) and that is tried again with backoff; null otherwise.",
  },
);

/** A message waiting for its third attempt after WhatsApp throttled it twice (examples). */
export const RETRYING_EXAMPLE = {
  attempts: 2,
  next_attempt_at: 1767260404,
  last_error: {
    code: "provider_rate_limited",
    message: "(Business Account) Cloud API throughput has been reached. (WhatsApp error 130429)",
    retryable: true,
  },
};

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
  {
    object: t.Literal("message"),
    ...messageFields,
    retrying: t.Nullable(MessageRetryingSchema, {
      description:
        "While an outbound `accepted` message waits to be tried again after a failed attempt: attempts, when the next is due, why the last failed. Null otherwise.",
    }),
  },
  {
    title: "HistoryMessage",
    description: "A message to or from the contact.",
    examples: [
      { object: "message", ...storedMessageExample, retrying: null },
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
        retrying: null,
      },
      {
        object: "message",
        ...storedMessageExample,
        id: "msg_6Wd2Ke4Lr6Mt8Nv0Pw2Qx4",
        direction: "outbound",
        type: "template",
        preview: "Hi Ana, your order A-2 has shipped.",
        text: "Hi Ana, your order A-2 has shipped.",
        status: "accepted",
        created: 1767260400,
        retrying: RETRYING_EXAMPLE,
      },
    ],
  },
);

export const HistoryList = listOf(HistoryMessageSchema, "The contact's messages, inbound and outbound.");
