import { CHANNEL } from "../channel/provider.ts";
import { epochSeconds } from "../clock.ts";

/** What the accepting transaction stores in messages.content: the send worker's instructions. */
export type StoredContent =
  | { kind: "text"; body: string }
  | {
      kind: "template";
      template_id: string;
      template_name: string;
      language: string;
      components: Record<string, unknown>;
    };

export interface AcceptedMessage {
  id: string;
  senderId: string;
  contactId: string;
  phone: string;
  content: StoredContent;
  createdAt: Date;
}

/**
 * SPEC §2 Message as POST /messages returns it. A replay presents the same object the first
 * request got (status `accepted`), so both answers carry the same body.
 */
export function presentAcceptedMessage(message: AcceptedMessage) {
  return {
    object: "message" as const,
    id: message.id,
    status: "accepted",
    direction: "outbound" as const,
    channel: CHANNEL,
    sender: message.senderId,
    to: { object: "contact" as const, id: message.contactId, phone: message.phone },
    content:
      message.content.kind === "template"
        ? {
            kind: "template" as const,
            template: message.content.template_id,
            template_name: message.content.template_name,
            language: message.content.language,
          }
        : { kind: "text" as const, preview: message.content.body },
    created: epochSeconds(message.createdAt),
  };
}
