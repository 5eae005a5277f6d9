import { contactIdentityOf, presentContactSummary } from "../contacts/presenter.ts";
import { presentMessageFields } from "../history/presenter.ts";
import type { ConversationRow } from "./repository.ts";

/** SPEC §2 Conversation. */
export function presentConversation(row: ConversationRow) {
  return {
    object: "conversation" as const,
    contact: presentContactSummary({
      ...contactIdentityOf(row),
      name: row.contact_name,
      channel: row.contact_channel,
    }),
    last_message: presentMessageFields(row),
    unread: row.unread,
  };
}
