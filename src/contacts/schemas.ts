import { t } from "elysia";

export const ContactIdParams = t.Object({
  contact_id: t.String({ pattern: "^ctc_[0-9A-Za-z]{1,64}$", description: "a `ctc_` id" }),
});

export const ContactPhoneQuery = t.Object({
  phone: t.String({ description: "E.164 phone number, e.g. +4915123456789", "x-param": "phone" }),
});

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
  { description: "The contact's 24-hour messaging window, as of this request." },
);

const contactSummaryFields = {
  object: t.Literal("contact"),
  id: t.String({ description: "`ctc_` id." }),
  name: t.Nullable(t.String()),
  phone: t.Nullable(t.String({ description: "E.164." })),
  channel: t.String({ description: "Channel name, `whatsapp`." }),
};

export const ContactSchema = t.Object(
  { ...contactSummaryFields, messaging: MessagingStateSchema },
  { description: "A customer the service has messaged or heard from." },
);

export const ContactSummarySchema = t.Object(contactSummaryFields);

export const ContactRefSchema = t.Object({
  object: t.Literal("contact"),
  id: t.String({ description: "`ctc_` id." }),
  phone: t.Nullable(t.String({ description: "E.164." })),
});
