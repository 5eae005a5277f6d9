/**
 * Provider notices (a changed number, a reaction, a type we do not model...) are stored as messages
 * of type `system_<kind>`, but they are not conversation: history, the feed, the event log and the
 * conversation summary leave them out, and they open no window. This is the rule in TypeScript; SQL
 * asks `is_system_message(type)` (sql/026_system_messages.sql), the same test.
 */
const SYSTEM_TYPE_PREFIX = "system_";

/** The stored type of a provider notice of `kind`: `system_` and the kind as a lowercase word. */
export function systemMessageType(kind: string): string {
  return `${SYSTEM_TYPE_PREFIX}${kind.replace(/[^a-z0-9_]/gi, "_").toLowerCase()}`;
}

/** Whether a message of this type is a provider notice (`system_<kind>`). */
export function isSystemMessageType(type: string): boolean {
  return type.startsWith(SYSTEM_TYPE_PREFIX);
}
