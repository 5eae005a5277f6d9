import { type MessagingState, WINDOW_MS } from "../contacts/messaging-state.ts";
import type { TemplateRow } from "../templates/repository.ts";
import type { StoredContent } from "./presenter.ts";
import type { Recipient } from "./recipient.ts";
import { isAuthenticationTemplate, windowClosed } from "./send-checks.ts";
import type { BoundTemplate } from "./template-binding.ts";

/** What a send says: its type, the text shown for it, what the send worker sends, a header's media. */
export interface SendContent {
  type: "text" | "template";
  text: string;
  content: StoredContent;
  media: { type: string; filename: string | null } | undefined;
  /** An authentication template (one-time codes): it needs the recipient's phone (DESIGN §14). */
  authentication: boolean;
}

/** Free text: only inside the 24-hour window, which must still be open at a scheduled send_at. */
export function textContent(
  body: string,
  recipient: Recipient,
  state: MessagingState,
  sendAt: Date | undefined,
): SendContent {
  if (!state.within_window) {
    throw windowClosed(
      state,
      "Free text can only be sent within 24 hours of the customer's last message; send an approved template.",
      "body",
    );
  }
  // Scheduled: the window must still be open at send_at as known now (checked again then).
  if (sendAt && recipient.lastInboundAt!.getTime() + WINDOW_MS <= sendAt.getTime()) {
    throw windowClosed(
      state,
      `The 24-hour window closes at ${state.window_expires_at}, before send_at; free text can only be scheduled inside it. Send an approved template.`,
      "send_at",
    );
  }
  return {
    type: "text",
    text: body,
    content: { kind: "text", body },
    media: undefined,
    authentication: false,
  };
}

/** An approved template bound to the request's values (and its header's media). */
export function templateContent(template: TemplateRow, bound: BoundTemplate): SendContent {
  const header = bound.components.header;
  return {
    type: "template",
    text: bound.rendered,
    content: {
      kind: "template",
      template_id: template.id,
      template_name: template.name,
      language: template.language,
      components: bound.components as Record<string, unknown>,
    },
    media:
      header && header.type !== "text" ? { type: header.type, filename: header.filename ?? null } : undefined,
    authentication: isAuthenticationTemplate(template),
  };
}
