import { t } from "elysia";
import { ContactSummarySchema } from "../contacts/schemas.ts";
import { FEED_LIMIT, FeedMessageSchema } from "../feed/schemas.ts";
import { cursorListOf, literalUnion } from "../http/schemas.ts";
import { queryInteger } from "../http/validation.ts";

export const EVENT_TYPES = [
  "message.received",
  "message.sent",
  "message.delivered",
  "message.read",
  "message.failed",
  "message.canceled",
  "contact.merged",
] as const;

export const EventTypeSchema = literalUnion(EVENT_TYPES, { description: "What happened to the message." });

export const EventQuery = t.Object({
  since: t.Optional(
    t.String({
      description:
        "an `evc_` cursor: the `next_cursor` of the previous page; absent = the oldest retained event",
    }),
  ),
  limit: t.Optional(queryInteger("limit", FEED_LIMIT)),
  types: t.Optional(
    t.String({
      description: `comma-separated event types to return (default all): ${EVENT_TYPES.join(", ")}. A call looks at up to 5,000 events of the log; \`has_more\` says when more is there, even after an empty page.`,
      "x-param": "types",
    }),
  ),
});

/** contact.merged's `data` (DESIGN §14): two contacts proved to be one person. */
export const ContactMergedSchema = t.Object(
  {
    survivor: ContactSummarySchema,
    merged: t.Array(t.String(), {
      description:
        "The ids merged into the survivor: they keep resolving to it (GET /contacts/{id}, history, `contact` in a send).",
    }),
  },
  {
    title: "ContactMerged",
    description:
      "Two contacts turned out to be one person: the younger was merged into the older (the survivor), with its messages, conversation and opt-out.",
  },
);

export const EventSchema = t.Object(
  {
    object: t.Literal("event"),
    id: t.String({ description: "`evt_` id: the same on every delivery of this event; de-duplicate by it." }),
    type: EventTypeSchema,
    created: t.Integer({ description: "When it happened (Unix seconds)." }),
    data: t.Union([FeedMessageSchema, ContactMergedSchema], {
      description: "The message as the feed shows it; for `contact.merged`, a ContactMerged.",
    }),
  },
  {
    title: "Event",
    description:
      "Something that happened to a message: `data` is the message as the feed shows it, as the event left it (its status and failure then); for `contact.merged`, the surviving contact and the ids merged into it.",
  },
);

export const EventList = cursorListOf(EventSchema, "The next events of the log, in log order.");
