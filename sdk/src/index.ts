/**
 * The messaging API's TypeScript client: `import { MessagingClient, ApiError } from "./sdk/src/index.ts"`.
 * See sdk/README.md.
 */

export { BATCH_MAX_BYTES, BATCH_MAX_ITEMS, type SendBatchOptions } from "./batch.ts";
export {
  type ConversationsOptions,
  type HistoryOptions,
  MessagingClient,
  type MessagingClientOptions,
  type SendOptions,
  type UploadOptions,
} from "./client.ts";
export { ApiError, BatchSendError } from "./errors.ts";
export type { FeedOptions } from "./feed.ts";
export type { RetryOptions } from "./transport.ts";
export type * from "./types.ts";
export { type VerifyOptions, verifyWebhook, WebhookVerificationError } from "./webhooks.ts";
