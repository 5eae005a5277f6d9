import type { MessagingState } from "./messaging-state.ts";
import type { ContactIdentityRow, ContactRow } from "./repository.ts";

/** How the provider knows the person (DESIGN §14): any of phone and BSUID may be missing, never both. */
type ContactIdentity = Pick<ContactRow, "id" | "phone" | "user_id" | "parent_user_id" | "username">;

type ContactFields = ContactIdentity & Pick<ContactRow, "name" | "channel">;

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
    user_id: contact.user_id,
    parent_user_id: contact.parent_user_id,
    username: contact.username,
    channel: contact.channel,
  };
}

/** A joined contact's columns (CONTACT_IDENTITY_COLUMNS) as the fields the presenters read. */
export function contactIdentityOf(row: ContactIdentityRow): ContactIdentity {
  return {
    id: row.contact_id,
    phone: row.contact_phone,
    user_id: row.contact_user_id,
    parent_user_id: row.contact_parent_user_id,
    username: row.contact_username,
  };
}

/** The contact inside a FeedMessage and an event's `data`. */
export function presentContactRef(contact: ContactIdentity) {
  return {
    object: "contact" as const,
    id: contact.id,
    phone: contact.phone,
    user_id: contact.user_id,
    parent_user_id: contact.parent_user_id,
    username: contact.username,
  };
}
