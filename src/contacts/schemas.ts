import { t } from "elysia";
import { MessagingStateSchema, messagingExample } from "../http/schemas.ts";

export const ContactIdParams = t.Object({
  contact_id: t.String({ pattern: "^ctc_[0-9A-Za-z]{1,64}$", description: "a `ctc_` id" }),
});

export const ContactPhoneQuery = t.Object({
  phone: t.String({ description: "E.164 phone number, e.g. +4915123456789", "x-param": "phone" }),
});

const contactSummaryFields = {
  object: t.Literal("contact"),
  id: t.String({ description: "`ctc_` id." }),
  name: t.Nullable(t.String()),
  phone: t.Nullable(t.String({ description: "E.164." })),
  channel: t.String({ description: "Channel name, `whatsapp`." }),
};

const contactExample = {
  object: "contact",
  id: "ctc_2Hj8Kl4mNp6Qr8St0UvWxY",
  name: "Ana Silva",
  phone: "+4915123456789",
  channel: "whatsapp",
};

export const ContactSchema = t.Object(
  { ...contactSummaryFields, messaging: MessagingStateSchema },
  {
    title: "Contact",
    description: "A customer the service has messaged or heard from.",
    examples: [{ ...contactExample, messaging: messagingExample }],
  },
);

export const ContactSummarySchema = t.Object(contactSummaryFields, {
  title: "ContactSummary",
  description: "A contact without its messaging state.",
  examples: [contactExample],
});

export const ContactRefSchema = t.Object(
  {
    object: t.Literal("contact"),
    id: t.String({ description: "`ctc_` id." }),
    phone: t.Nullable(t.String({ description: "E.164." })),
  },
  {
    title: "ContactRef",
    description: "A reference to a contact.",
    examples: [{ object: "contact", id: contactExample.id, phone: contactExample.phone }],
  },
);
