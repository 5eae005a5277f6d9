/**
 * SPEC §2 MessagingState, computed at read time from the contact's last inbound message and its
 * opt-out (DESIGN §13).
 */
export interface MessagingState {
  sendable: boolean;
  within_window: boolean;
  window_expires_at: string | null;
  requires_template: boolean;
  opted_out: boolean;
}

export const WINDOW_MS = 24 * 3600 * 1000;

/**
 * The 24-hour customer-service window (DESIGN §3: from the provider's timestamp of the latest
 * inbound message). Free text is sendable only inside it, only with an active sender, and never to
 * a contact who opted out (`opted_out_at` set, src/contacts/opt-out.ts).
 */
export function messagingState(
  lastInboundAt: Date | null,
  now: Date,
  hasActiveSender: boolean,
  optedOut = false,
): MessagingState {
  const expiresAt = lastInboundAt ? new Date(lastInboundAt.getTime() + WINDOW_MS) : null;
  const withinWindow = expiresAt !== null && expiresAt.getTime() > now.getTime();
  const sendable = withinWindow && hasActiveSender && !optedOut;
  return {
    sendable,
    within_window: withinWindow,
    window_expires_at: withinWindow && expiresAt ? expiresAt.toISOString().replace(/\.\d{3}Z$/, "Z") : null,
    requires_template: !sendable,
    opted_out: optedOut,
  };
}
