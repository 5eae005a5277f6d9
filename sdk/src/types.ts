/** The SDK's public types: aliases into the types generated from the server's OpenAPI document. */
import type { components, operations } from "./generated/openapi.ts";

type Schemas = components["schemas"];
/** The JSON body an operation takes (bodies without a schema name of their own). */
type JsonBody<Operation extends keyof operations> = operations[Operation] extends {
  requestBody: { content: { "application/json": infer Body } };
}
  ? Body
  : never;

export type Message = Schemas["Message"];
/**
 * What `Message.status` (and `status` in history, conversations, the feed and events) holds for an
 * outbound message; null for an inbound one. `scheduled` (a `send_at` not reached yet) comes before
 * `accepted`; `canceled` is final; `failed` carries `failure` (DESIGN §3, §13). The generated types
 * say `string`: compare against these.
 */
export type MessageStatus = "scheduled" | "accepted" | "sent" | "delivered" | "read" | "failed" | "canceled";
/**
 * Why a message failed (`failure`), or why the last attempt of a message that is tried again failed
 * (`retrying.last_error`). `code` is one of `MessageFailureCode`, each explained on `{base_url}/docs`
 * at `#failure-<code>`.
 */
export type MessageFailure = Schemas["MessageFailure"];
export type MessageFailureCode = Schemas["MessageFailureCode"];
/**
 * `retrying` on a Message (GET) and a HistoryMessage: an `accepted` message waiting to be tried
 * again, with `attempts`, `next_attempt_at` (Unix seconds, null while an attempt is under way) and
 * `last_error`; null otherwise.
 */
export type MessageRetrying = Schemas["MessageRetrying"];
export type SendMessageRequest = Schemas["SendMessageRequest"];
/** One item of `messages.sendBatch`: a SendMessageRequest plus an optional `idempotency_key` of its own. */
export type SendBatchItem = Schemas["SendBatchItem"];
/**
 * One item's outcome in `messages.sendBatch`: `status` is what the item would have had alone (201,
 * 200 for a replay of its key, 400/404/409/429), with its `message` or its `error` (`param` relative
 * to the item, e.g. `template.name`); `index` is the item's position in the array you passed.
 */
export type BatchResult = Schemas["BatchResult"];
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
 * `message.received`, `message.sent`, `message.delivered`, `message.read`, `message.failed`,
 * `message.canceled`, `contact.merged`.
 */
export type EventType = Schemas["Event"]["type"];
/** `contact.merged`'s data: the contact that survives, and the ids merged into it (they keep resolving to it). */
export type ContactMerged = Schemas["ContactMerged"];
type EventOf<Type extends EventType, Data> = Omit<Schemas["Event"], "type" | "data"> & {
  type: Type;
  data: Data;
};
/** An event about a message: its `data` is the message as the feed shows it. */
export type MessageEvent = EventOf<Exclude<EventType, "contact.merged">, FeedMessage>;
export type ContactMergedEvent = EventOf<"contact.merged", ContactMerged>;
/**
 * An event of the log (DESIGN §12): from `client.events.consume`, or a push `client.webhooks.verify`
 * checked. Its `type` says what `data` is: test it (`event.type === "contact.merged"`) to narrow.
 */
export type WebhookEvent = MessageEvent | ContactMergedEvent;
export type EventPage = Omit<Schemas["EventList"], "data"> & { data: WebhookEvent[] };

/** Where events are pushed, and how far delivery has come (`delivery`). */
export type WebhookEndpoint = Schemas["WebhookEndpoint"];
/** A webhook endpoint with its `whsec_` secret: only from `create` and `rotateSecret`. */
export type WebhookEndpointWithSecret = Schemas["WebhookEndpointWithSecret"];
export type DeletedWebhookEndpoint = Schemas["DeletedWebhookEndpoint"];
export type CreateWebhookEndpointRequest = JsonBody<"createWebhookEndpoint">;
export type UpdateWebhookEndpointRequest = JsonBody<"updateWebhookEndpoint">;
export type ReplayWebhookEndpointRequest = JsonBody<"replayWebhookEndpoint">;

/** The scopes an application can hold: sending, reading, and managing webhook endpoints. */
export type Scope = "messaging:send" | "messaging:read" | "webhooks:manage";

/**
 * What a list call returns: the items as an array, which also carries the API's list envelope
 * (`object`, `url`, `has_more`, and `data`, the same items).
 */
export type ListResult<T> = T[] & { object: "list"; url: string; has_more: boolean; data: T[] };
