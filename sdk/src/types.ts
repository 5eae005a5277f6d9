/** The SDK's public types: aliases into the types generated from the server's OpenAPI document. */
import type { components } from "./generated/openapi.ts";

type Schemas = components["schemas"];

export type Message = Schemas["Message"];
export type SendMessageRequest = Schemas["SendMessageRequest"];
export type SendMessageTemplate = Schemas["SendMessageTemplate"];
export type FeedMessage = Schemas["FeedMessage"];
export type FeedPage = Schemas["FeedMessageList"];
export type HistoryMessage = Schemas["HistoryMessage"];
export type Contact = Schemas["Contact"];
export type MessagingState = Schemas["MessagingState"];
export type Conversation = Schemas["Conversation"];
export type Sender = Schemas["Sender"];
export type Template = Schemas["Template"];
export type Media = Schemas["Media"];
export type TokenResponse = Schemas["TokenResponse"];
export type ErrorBody = Schemas["ErrorResponse"]["error"];
export type OAuthErrorBody = Schemas["OAuthError"];

/**
 * A pushed event (DESIGN §12), as `client.webhooks.verify` returns it: `data` is the message as the
 * feed shows it at the moment of the event. Written here until the service documents its Event
 * schema (then an alias into the generated types, like the others).
 */
export interface WebhookEvent {
  object: "event";
  /** `evt_…`: the same on every delivery of this event (de-duplicate by it, or by `webhook-id`). */
  id: string;
  type: "message.received" | "message.sent" | "message.delivered" | "message.read" | "message.failed";
  /** Unix seconds. */
  created: number;
  data: FeedMessage;
}

/** The two scopes an application can hold (SPEC §5). */
export type Scope = "messaging:send" | "messaging:read";

/**
 * What a list call returns: the items as an array, which also carries the API's list envelope
 * (`object`, `url`, `has_more`, and `data`, the same items).
 */
export type ListResult<T> = T[] & { object: "list"; url: string; has_more: boolean; data: T[] };
