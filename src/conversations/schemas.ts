import { Type } from "@sinclair/typebox";
import { t } from "elysia";
import { ContactSummarySchema } from "../contacts/schemas.ts";
import { messageFields, storedMessageExample } from "../history/schemas.ts";
import { listOf } from "../http/schemas.ts";
import { queryInteger } from "../http/validation.ts";

export const CONVERSATIONS_LIMIT = { minimum: 1, maximum: 100, default: 25 };
// 9999-12-31T23:59:59Z: any real timestamp, and no Date overflow.
const LATEST_EPOCH_SECONDS = 253_402_300_799;

export const ConversationsQuery = t.Object({
  limit: t.Optional(queryInteger("limit", CONVERSATIONS_LIMIT)),
  before: t.Optional(queryInteger("before", { minimum: 0, maximum: LATEST_EPOCH_SECONDS })),
  order: t.Optional(
    t.Union([t.Literal("asc"), t.Literal("desc")], {
      default: "desc",
      description: "`desc` newest first (default), `asc` oldest first",
    }),
  ),
});

export const ConversationSchema = t.Object(
  {
    object: t.Literal("conversation"),
    contact: ContactSummarySchema,
    last_message: t.Object(messageFields, {
      title: "LastMessage",
      description: "The conversation's newest message.",
    }),
    // Not t.Integer, which would make Elysia re-encode every response (see history/schemas.ts).
    unread: Type.Integer({
      description:
        "Inbound messages newer than your last outbound message to this contact and than the last time the panel opened the conversation.",
    }),
  },
  {
    title: "Conversation",
    description: "One contact's conversation, summarized by its last message.",
    examples: [
      {
        object: "conversation",
        contact: {
          object: "contact",
          id: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY",
          name: "Ana Silva",
          phone: "+4915123456789",
          user_id: "DE.1502576394655843",
          parent_user_id: null,
          username: null,
          channel: "whatsapp",
        },
        last_message: storedMessageExample,
        unread: 1,
      },
    ],
  },
);

export const ConversationList = listOf(ConversationSchema, "Conversations, ordered by last message.");
