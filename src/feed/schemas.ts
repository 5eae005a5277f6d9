import { t } from "elysia";
import { FeedContactSchema, feedContactExample } from "../contacts/schemas.ts";
import { messageFields, storedMessageExample } from "../history/schemas.ts";
import { cursorListOf } from "../http/schemas.ts";
import { queryInteger } from "../http/validation.ts";

export const FEED_LIMIT = { minimum: 1, maximum: 500, default: 100 };

export const FeedQuery = t.Object({
  since: t.Optional(
    t.String({
      description: "an `fd_` cursor: the `next_cursor` of the previous page; absent = from the start",
    }),
  ),
  limit: t.Optional(queryInteger("limit", FEED_LIMIT)),
});

export const FeedMessageSchema = t.Object(
  {
    object: t.Literal("message"),
    ...messageFields,
    contact: FeedContactSchema,
  },
  {
    title: "FeedMessage",
    description: "A message, inbound or outbound, with its contact.",
    examples: [
      {
        object: "message",
        ...storedMessageExample,
        contact: feedContactExample,
      },
    ],
  },
);

export const FeedList = cursorListOf(FeedMessageSchema, "The next messages of the feed, in feed order.");
