import type { MessagingState } from "./messaging-state.ts";
import type { ContactRow } from "./repository.ts";

type ContactFields = Pick<ContactRow, "id" | "name" | "phone" | "channel">;

/** SPEC §2 Contact: a contact as the contacts service reads it, with its messaging state. */
export function presentContact({
  contact,
  messaging,
}: {
  contact: ContactFields;
  messaging: MessagingState;
}) {
  return { ...presentContactSummary(contact), messaging };
}

/** The contact inside a Conversation: a Contact without `messaging`. */
export function presentContactSummary(contact: ContactFields) {
  return {
    object: "contact" as const,
    id: contact.id,
    name: contact.name,
    phone: contact.phone,
    channel: contact.channel,
  };
}

/** The contact inside a FeedMessage. */
export function presentContactRef(contact: Pick<ContactRow, "id" | "phone">) {
  return { object: "contact" as const, id: contact.id, phone: contact.phone };
}
