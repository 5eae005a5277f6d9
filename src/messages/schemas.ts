import { type Static, t } from "elysia";
import { ContactRefSchema } from "../contacts/schemas.ts";
import { MessageFailureSchema, MessageRetryingSchema } from "../history/schemas.ts";
import { withExclusivePairs } from "../http/schemas.ts";
import { PATTERN_MEANS_KEY } from "../http/validation.ts";

/** What a value that fails a printable-ASCII pattern is told it must be. */
export const PRINTABLE_ASCII =
  "printable ASCII characters only (space to ~, no accents, emoji or control characters)";

const MediaHeader = t.Object(
  {
    type: t.Union([t.Literal("image"), t.Literal("video"), t.Literal("document")]),
    link: t.Optional(
      t.String({
        maxLength: 2048,
        description:
          "A public https URL of the file (not an address of a private, loopback or link-local network).",
      }),
    ),
    media: t.Optional(t.String({ maxLength: 128, description: "A `med_` handle from POST /media." })),
    filename: t.Optional(t.String({ minLength: 1, maxLength: 255, description: "Shown for documents." })),
  },
  {
    additionalProperties: false,
    title: "TemplateMediaHeader",
    description: "The media of an IMAGE, VIDEO or DOCUMENT header: give `link` or `media`.",
  },
);

const VariableValues = t.Union([t.Record(t.String(), t.String()), t.Array(t.String())], {
  description: 'Placeholder values: {"1": "Ana", "2": "A-1"}, named {"order_id": "A-1"}, or ["Ana", "A-1"].',
});

export const SendTemplate = t.Object(
  {
    name: t.String({ minLength: 1, maxLength: 512, description: "An approved template's name." }),
    language: t.Optional(
      t.String({
        minLength: 2,
        maxLength: 16,
        description: "Language code; may be omitted when the template has one.",
      }),
    ),
    variables: t.Optional(t.Object({ body: t.Optional(VariableValues) }, { additionalProperties: false })),
    header: t.Optional(
      t.Union([t.String({ description: "Value of a TEXT header's variable." }), MediaHeader], {
        description:
          "TEXT header variable, or the media of an IMAGE/VIDEO/DOCUMENT header (default: the template's sample).",
      }),
    ),
    buttons: t.Optional(
      t.Record(t.String(), t.String(), {
        description: 'Dynamic URL button values by button index: {"0": "A-1"}.',
      }),
    ),
  },
  {
    additionalProperties: false,
    title: "SendMessageTemplate",
    description: "An approved template and the values of its variables.",
  },
);

/** DESIGN §13: the sender's own reference, echoed on the message wherever it is shown and on its events. */
export const ClientReference = t.String({
  minLength: 1,
  maxLength: 128,
  pattern: "^[\\x20-\\x7E]+$",
  [PATTERN_MEANS_KEY]: PRINTABLE_ASCII,
  description:
    "Your own reference for this message (1-128 printable ASCII characters, not unique): echoed on the message in every view and on its events.",
});

// Whole numbers are t.Number({ multipleOf: 1 }), not t.Integer: an Integer in a body schema makes
// Elysia coerce a missing body into an object, so an empty body would no longer be "missing".
export const SendMessageRequest = t.Object(
  {
    sender: t.Optional(
      t.String({ maxLength: 128, description: "`snd_` id; optional when exactly one sender is active." }),
    ),
    to: t.Optional(
      t.String({
        maxLength: 140,
        description:
          "The recipient: a phone number (E.164, e.g. +4915123456789) or the business-scoped user id WhatsApp gives a customer who may hide their number (BSUID, e.g. DE.1502576394655843, or a parent BSUID US.ENT.…). A customer without a phone is reached by their BSUID.",
      }),
    ),
    contact: t.Optional(t.String({ maxLength: 128, description: "`ctc_` id, instead of `to`." })),
    recipient_name: t.Optional(
      t.String({ minLength: 1, maxLength: 256, description: "Name for a new contact." }),
    ),
    template: t.Optional(SendTemplate),
    body: t.Optional(
      t.String({
        minLength: 1,
        description: "Free text, 1 to 4096 characters; only inside the 24-hour window.",
      }),
    ),
    client_reference: t.Optional(ClientReference),
    send_at: t.Optional(
      t.Number({
        multipleOf: 1,
        description:
          "Schedule the send (Unix seconds, from now + 60 s to now + 30 days): the message is `scheduled` until then, cancelable, and goes out at that time.",
      }),
    ),
    valid_for: t.Optional(
      t.Number({
        multipleOf: 1,
        minimum: 1,
        maximum: 86400,
        description:
          "Seconds (1-86,400) the message may wait to be handed to the provider after acceptance (after `send_at` when scheduled); past that it fails with `failure.code` `expired` and is never sent late.",
      }),
    ),
  },
  {
    additionalProperties: false,
    title: "SendMessageRequest",
    description:
      "Exactly one of `template` and `body`; `to` (a phone number or a BSUID) or `contact`; `sender` unless exactly one sender is active.",
    examples: [
      {
        to: "+4915123456789",
        recipient_name: "Ana Silva",
        template: { name: "order_shipped", language: "en", variables: { body: { "1": "Ana", "2": "A-1" } } },
      },
      { contact: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY", body: "Your parcel arrives today between 10:00 and 12:00." },
      { to: "DE.1502576394655843", body: "Thanks, Jonas: your parcel arrives today." },
    ],
  },
);

export type SendMessageInput = Static<typeof SendMessageRequest>;

/** What the OpenAPI document shows: exactly one of `to`/`contact` and of `template`/`body`. */
export const SendMessageRequestDocumented = withExclusivePairs(SendMessageRequest, [
  ["to", "contact"],
  ["template", "body"],
]);

export const MessageSchema = t.Object(
  {
    object: t.Literal("message"),
    id: t.String({ description: "`msg_` id." }),
    status: t.Nullable(
      t.String({
        description:
          "`accepted` on creation (`scheduled` with `send_at`); then `sent`, `delivered`, `read` or `failed`, or `canceled` (GET). Null for an inbound message.",
      }),
    ),
    direction: t.Union([t.Literal("outbound"), t.Literal("inbound")], {
      description: "`outbound` for a send; GET /messages/{id} also serves inbound messages.",
    }),
    channel: t.String({ description: "Channel name, `whatsapp`." }),
    sender: t.String({ description: "`snd_` id of the sender used." }),
    to: ContactRefSchema,
    content: t.Union(
      [
        t.Object(
          {
            kind: t.Literal("template"),
            template: t.String({ description: "`tpl_` id." }),
            template_name: t.String(),
            language: t.String(),
          },
          { title: "TemplateContent" },
        ),
        t.Object(
          { kind: t.Literal("text"), preview: t.String({ description: "The text sent." }) },
          { title: "TextContent" },
        ),
      ],
      { description: "What was sent: a template, or free text." },
    ),
    created: t.Integer({ description: "Unix epoch seconds." }),
    client_reference: t.Nullable(t.String({ description: "The `client_reference` the send gave, or null." })),
    send_at: t.Nullable(
      t.Integer({ description: "When a scheduled message goes out (Unix seconds); null when sent at once." }),
    ),
    valid_for: t.Nullable(
      t.Integer({
        description: "Seconds the message may wait to be handed to the provider; null = no limit.",
      }),
    ),
    failure: t.Nullable(MessageFailureSchema),
    retrying: t.Nullable(MessageRetryingSchema, {
      description:
        "While an `accepted` message waits to be tried again after a failed attempt: how many attempts were made, when the next is due and why the last failed. Null otherwise (always on POST /messages, which answers before any attempt).",
    }),
  },
  {
    title: "Message",
    description:
      "A message: as POST /messages accepted it, or as GET /messages/{id} finds it now (its current status, failure and retry state).",
    examples: [
      {
        object: "message",
        id: "msg_4Fq9ZtB2xLmN8pRsV3wYcD",
        status: "accepted",
        direction: "outbound",
        channel: "whatsapp",
        sender: "snd_7Kp2Qr9sTvWx3yZa5bCdEf",
        to: { object: "contact", id: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY", phone: "+4915123456789" },
        content: {
          kind: "template",
          template: "tpl_9Ab3Cd5Ef7Gh9Ij1Kl3Mn",
          template_name: "order_shipped",
          language: "en",
        },
        created: 1767225600,
        client_reference: "order-A-1001",
        send_at: null,
        valid_for: null,
        failure: null,
        retrying: null,
      },
    ],
  },
);
