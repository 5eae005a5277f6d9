import { t } from "elysia";

export const ContactIdParams = t.Object({
  contact_id: t.String({ pattern: "^ctc_[0-9A-Za-z]{1,64}$", description: "a `ctc_` id" }),
});

export const ContactPhoneQuery = t.Object({
  phone: t.String({ description: "E.164 phone number, e.g. +4915123456789", "x-param": "phone" }),
});

const messagingExample = {
  sendable: true,
  within_window: true,
  window_expires_at: "2026-01-02T09:30:00Z",
  requires_template: false,
};

export const MessagingStateSchema = t.Object(
  {
    sendable: t.Boolean({
      description: "Free text may be sent now: the window is open and a sender is active.",
    }),
    within_window: t.Boolean({ description: "The customer wrote within the last 24 hours." }),
    window_expires_at: t.Nullable(
      t.String({
        format: "date-time",
        description: "When the window closes (ISO 8601 UTC); null when closed.",
      }),
    ),
    requires_template: t.Boolean({ description: "Only an approved template may be sent now." }),
  },
  {
    title: "MessagingState",
    description: "The contact's 24-hour messaging window, as of this request.",
    examples: [messagingExample],
  },
);

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
