/** SPEC §2 MessagingState, computed at read time from the contact's last inbound message. */
export interface MessagingState {
  sendable: boolean;
  within_window: boolean;
  window_expires_at: string | null;
  requires_template: boolean;
}

export const WINDOW_MS = 24 * 3600 * 1000;

/**
 * The 24-hour customer-service window (DESIGN §3: from the provider's timestamp of the latest
 * inbound message). Free text is sendable only inside it and only with an active sender.
 */
export function messagingState(
  lastInboundAt: Date | null,
  now: Date,
  hasActiveSender: boolean,
): MessagingState {
  const expiresAt = lastInboundAt ? new Date(lastInboundAt.getTime() + WINDOW_MS) : null;
  const withinWindow = expiresAt !== null && expiresAt.getTime() > now.getTime();
  const sendable = withinWindow && hasActiveSender;
  return {
    sendable,
    within_window: withinWindow,
    window_expires_at: withinWindow && expiresAt ? expiresAt.toISOString().replace(/\.\d{3}Z$/, "Z") : null,
    requires_template: !sendable,
  };
}
