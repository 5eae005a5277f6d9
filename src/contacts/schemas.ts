import { t } from "elysia";
import { MessagingStateSchema, messagingExample } from "../http/schemas.ts";

export const ContactIdParams = t.Object({
  contact_id: t.String({ pattern: "^ctc_[0-9A-Za-z]{1,64}$", description: "a `ctc_` id" }),
});

/** GET /contacts: exactly one of `phone` and `user_id` (the service says which is missing or extra). */
export const ContactLookupQuery = t.Object({
  phone: t.Optional(t.String({ description: "E.164 phone number, e.g. +4915123456789", "x-param": "phone" })),
  user_id: t.Optional(
    t.String({
      maxLength: 140,
      description:
        "A business-scoped user id (BSUID, e.g. `DE.1502576394655843`) or a parent BSUID (`US.ENT.…`): the contact the provider knows by it, now or before.",
      "x-param": "user_id",
    }),
  ),
});

/** How the provider knows the person (DESIGN §14), on the Contact and every embedded contact. */
const contactIdentityFields = {
  phone: t.Nullable(
    t.String({
      description:
        "E.164. Null when the customer withholds it (a WhatsApp user with a username): the contact is known by `user_id`.",
    }),
  ),
  user_id: t.Nullable(
    t.String({
      description:
        "The business-scoped user id (BSUID, `CC.` + letters and digits) WhatsApp knows the customer by for your business; null until the provider has named it.",
    }),
  ),
  parent_user_id: t.Nullable(
    t.String({
      description: "The parent BSUID shared by linked business portfolios (`CC.ENT.…`), when enabled.",
    }),
  ),
  username: t.Nullable(
    t.String({
      description:
        "The customer's WhatsApp username, when they adopted one: shown, never a key (they may change it).",
    }),
  ),
};

const contactSummaryFields = {
  object: t.Literal("contact"),
  id: t.String({ description: "`ctc_` id." }),
  name: t.Nullable(t.String()),
  ...contactIdentityFields,
  channel: t.String({ description: "Channel name, `whatsapp`." }),
};

const contactIdentityExample = {
  phone: "+4915123456789",
  user_id: "DE.1502576394655843",
  parent_user_id: null,
  username: null,
};

const contactExample = {
  object: "contact",
  id: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY",
  name: "Ana Silva",
  ...contactIdentityExample,
  channel: "whatsapp",
};

/** A customer who withholds their phone number (examples). */
const phonelessContactExample = {
  ...contactExample,
  id: "ctc_5Mn7Pq9Rs1Tu3Vw5Xy7Za9",
  name: "Jonas",
  phone: null,
  user_id: "DE.1781122334455667",
  username: "jonas.k",
};

export const ContactSchema = t.Object(
  { ...contactSummaryFields, messaging: MessagingStateSchema },
  {
    title: "Contact",
    description: "A customer the service has messaged or heard from.",
    examples: [
      { ...contactExample, messaging: messagingExample },
      { ...phonelessContactExample, messaging: messagingExample },
    ],
  },
);

export const ContactSummarySchema = t.Object(contactSummaryFields, {
  title: "ContactSummary",
  description: "A contact without its messaging state.",
  examples: [contactExample],
});

/** A Message's `to` (SPEC §2): the contact's id and phone. */
export const ContactRefSchema = t.Object(
  {
    object: t.Literal("contact"),
    id: t.String({ description: "`ctc_` id." }),
    phone: t.Nullable(t.String({ description: "E.164; null when the customer withholds it." })),
  },
  {
    title: "ContactRef",
    description: "A reference to a contact.",
    examples: [{ object: "contact", id: contactExample.id, phone: contactExample.phone }],
  },
);

/** A FeedMessage's and an event's `contact`: its id and how the provider knows the person. */
export const FeedContactSchema = t.Object(
  {
    object: t.Literal("contact"),
    id: t.String({ description: "`ctc_` id." }),
    ...contactIdentityFields,
  },
  {
    title: "FeedContact",
    description: "The contact of a message: its id, phone, BSUID and username.",
    examples: [{ object: "contact", id: contactExample.id, ...contactIdentityExample }],
  },
);

/** The example contact of a FeedMessage (feed and events examples). */
export const feedContactExample = { object: "contact", id: contactExample.id, ...contactIdentityExample };
