import { type SendBatchOptions, sendBatch } from "./batch.ts";
import { consumeEvents, consumeFeed, type FeedOptions } from "./feed.ts";
import { Transport, type TransportOptions } from "./transport.ts";
import type {
  BatchResult,
  Contact,
  Conversation,
  CreateWebhookEndpointRequest,
  DeletedWebhookEndpoint,
  EventType,
  FeedMessage,
  HistoryMessage,
  ListResult,
  Media,
  Message,
  ReplayWebhookEndpointRequest,
  SendBatchItem,
  Sender,
  SendMessageRequest,
  Template,
  UpdateWebhookEndpointRequest,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
  WebhookEvent,
} from "./types.ts";
import { type VerifyOptions, verifyWebhook } from "./webhooks.ts";

export type MessagingClientOptions = TransportOptions;

interface ListEnvelope<T> {
  object: "list";
  url: string;
  has_more: boolean;
  data: T[];
}

function listResult<T>(envelope: ListEnvelope<T>): ListResult<T> {
  return Object.assign([...envelope.data], envelope);
}

const path = (template: TemplateStringsArray, ...ids: string[]) =>
  template.reduce((out, part, i) => out + part + (i < ids.length ? encodeURIComponent(ids[i]!) : ""), "");

export interface SendOptions {
  /**
   * Makes the send safe to repeat: the API sends once per key and answers a repeat with the first
   * message. Default: a new random key per call, which every retry of that call reuses.
   */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

export interface UploadOptions {
  /** Name shown to the recipient (documents). */
  filename?: string;
  /** `snd_` id; optional when the account has exactly one active sender. */
  sender?: string;
  signal?: AbortSignal;
}

export interface HistoryOptions {
  /** `asc` (default, oldest first) or `desc` (newest first). */
  order?: "asc" | "desc";
  /** Messages per request (1..200, default 50). */
  pageSize?: number;
  signal?: AbortSignal;
}

export interface ConversationsOptions {
  /** `desc` (default, most recent last message first) or `asc`. */
  order?: "asc" | "desc";
  /** Conversations per request (1..100, default 100). */
  pageSize?: number;
  signal?: AbortSignal;
}

/**
 * Pages of a list the API walks newest first with `before`; `asc` is that walk reversed (the API's
 * `before` only pages backwards, so an oldest-first walk reads the whole list first).
 */
async function* walkNewestFirst<T>(
  order: "asc" | "desc",
  fetchPage: (before: string | number | undefined) => Promise<ListEnvelope<T>>,
  positionOf: (item: T) => string | number,
  identity: (item: T) => string,
): AsyncGenerator<T> {
  const seen = new Set<string>();
  const buffered: T[] = [];
  let before: string | number | undefined;
  for (;;) {
    const page = await fetchPage(before);
    for (const item of page.data) {
      // A list that changes while it is walked may repeat an item across pages.
      const key = identity(item);
      if (seen.has(key)) continue;
      seen.add(key);
      if (order === "desc") yield item;
      else buffered.push(item);
    }
    const last = page.data.at(-1);
    if (!page.has_more || last === undefined || positionOf(last) === before) break;
    before = positionOf(last);
  }
  for (let i = buffered.length - 1; i >= 0; i--) yield buffered[i]!;
}

/** The messaging API (SPEC §4). Zero dependencies: the platform's fetch, FormData and Blob. */
export class MessagingClient {
  private readonly transport: Transport;

  constructor(options: MessagingClientOptions) {
    this.transport = new Transport(options);
  }

  /**
   * The bearer token the next call would send (fetched, or renewed, as a call would: with the
   * retries). For a tool that calls the API by other means, e.g. a load generator or curl; it
   * expires within the hour, so ask again rather than keep it.
   */
  accessToken(options: { signal?: AbortSignal } = {}): Promise<string> {
    return this.transport.accessToken(options.signal);
  }

  /** The event log (GET /events, DESIGN §12). */
  readonly events = {
    /**
     * Follows the log from `since` (absent: the oldest event kept) for as long as the caller
     * iterates, like `feed.consume`: redeliveries dropped, `onCursor` after each page was taken;
     * with `stopAtHead`, until it has read up to the head (a catch-up).
     */
    consume: (options: FeedOptions & { types?: EventType[] } = {}): AsyncGenerator<WebhookEvent> =>
      consumeEvents(this.transport, options),
  };

  /** Pushes from the service (Standard Webhooks): verify one before trusting it. */
  readonly webhooks = {
    /**
     * The event of a delivery, once its signature (with the endpoint's `whsec_` secret) and its
     * timestamp (within 5 minutes) hold; throws WebhookVerificationError otherwise. Pass the body
     * exactly as received.
     */
    verify: (
      rawBody: string | Uint8Array,
      headers: Parameters<typeof verifyWebhook>[1],
      secret: string,
      options?: VerifyOptions,
    ): Promise<WebhookEvent> => verifyWebhook(rawBody, headers, secret, options),
  };

  /**
   * Where events are pushed (/webhook_endpoints: reading takes `messaging:read`, creating, changing,
   * rotating, replaying and deleting `webhooks:manage`); verify deliveries with `webhooks.verify`.
   */
  readonly webhookEndpoints = {
    /**
     * POST /webhook_endpoints: 201, with the `whsec_` `secret` (shown only here and by `rotateSecret`:
     * store it). `events` omitted: every type. Delivery starts with the events after this call.
     */
    create: (request: CreateWebhookEndpointRequest): Promise<WebhookEndpointWithSecret> =>
      this.transport.request<WebhookEndpointWithSecret>("POST", "/webhook_endpoints", { json: request }),
    /** GET /webhook_endpoints: every endpoint of the account, oldest first. */
    list: async (): Promise<ListResult<WebhookEndpoint>> =>
      listResult(await this.transport.request<ListEnvelope<WebhookEndpoint>>("GET", "/webhook_endpoints")),
    /** GET /webhook_endpoints/{id}, with its `delivery` state; ApiError `resource_missing` (404) when unknown. */
    get: (endpointId: string): Promise<WebhookEndpoint> =>
      this.transport.request<WebhookEndpoint>("GET", path`/webhook_endpoints/${endpointId}`),
    /** PATCH /webhook_endpoints/{id}: `url`, `events`, `description`, or `status` (enabled again, it resumes from its cursor). */
    update: (endpointId: string, changes: UpdateWebhookEndpointRequest): Promise<WebhookEndpoint> =>
      this.transport.request<WebhookEndpoint>("PATCH", path`/webhook_endpoints/${endpointId}`, {
        json: changes,
      }),
    /** DELETE /webhook_endpoints/{id}: nothing more is posted to it. */
    delete: (endpointId: string): Promise<DeletedWebhookEndpoint> =>
      this.transport.request<DeletedWebhookEndpoint>("DELETE", path`/webhook_endpoints/${endpointId}`),
    /** POST /webhook_endpoints/{id}/rotate_secret: a new `secret`; the old one still signs for 24 hours. */
    rotateSecret: (endpointId: string): Promise<WebhookEndpointWithSecret> =>
      this.transport.request<WebhookEndpointWithSecret>(
        "POST",
        path`/webhook_endpoints/${endpointId}/rotate_secret`,
      ),
    /**
     * POST /webhook_endpoints/{id}/replay: delivery starts over after `since` (an `evc_` cursor: a
     * `delivery.cursor`, or a `next_cursor` of GET /events; `null` = the oldest event kept).
     */
    replay: (endpointId: string, request: ReplayWebhookEndpointRequest): Promise<WebhookEndpoint> =>
      this.transport.request<WebhookEndpoint>("POST", path`/webhook_endpoints/${endpointId}/replay`, {
        json: request,
      }),
  };

  readonly messages = {
    /** POST /messages: 201 Message, or the first send's Message when the key was used before. */
    send: (request: SendMessageRequest, options: SendOptions = {}): Promise<Message> =>
      this.transport.request<Message>("POST", "/messages", {
        json: request,
        // Made once per logical call, before any attempt: a retry after a lost answer reuses it.
        headers: { "idempotency-key": options.idempotencyKey ?? crypto.randomUUID() },
        signal: options.signal,
      }),
    /**
     * POST /messages/batch, as many calls as the items need (1,000 items or 4 MB a call), one after
     * another: one row per item, in your order, `index` its position in `items`. Items are
     * independent: a refused one has its `error` in its row, and nothing is thrown for it. Each item
     * is sent with its `idempotency_key`, or with a random one made before the first attempt, so a
     * retried call sends nothing twice. A call that fails after its retries (or is refused whole, or
     * aborted) rejects with BatchSendError: the rows answered so far, and the items left.
     */
    sendBatch: (items: readonly SendBatchItem[], options: SendBatchOptions = {}): Promise<BatchResult[]> =>
      sendBatch(this.transport, items, options),
    /**
     * GET /messages/{id}: one message, inbound or outbound, with its current status and failure, and
     * `retrying` while it waits to be tried again after a failed attempt.
     */
    get: (messageId: string): Promise<Message> =>
      this.transport.request<Message>("GET", path`/messages/${messageId}`),
    /**
     * POST /messages/{id}/cancel: the Message in status `canceled`, which the provider never
     * receives: one `scheduled`, or `accepted` and not yet handed over. Canceling a canceled message
     * answers it again. Once handed to the provider (or failed), ApiError `message_not_cancelable`
     * (409). The quota unit the send spent is not given back.
     */
    cancel: (messageId: string): Promise<Message> =>
      this.transport.request<Message>("POST", path`/messages/${messageId}/cancel`),
  };

  readonly media = {
    /** POST /media (multipart): a `med_` handle for `template.header.media`. */
    upload: (file: Blob | ArrayBuffer | Uint8Array, options: UploadOptions = {}): Promise<Media> => {
      const form = new FormData();
      const blob = file instanceof Blob ? file : new Blob([file as BlobPart]);
      form.append("file", blob, options.filename ?? (file instanceof File ? file.name : "upload"));
      if (options.filename !== undefined) form.append("filename", options.filename);
      if (options.sender !== undefined) form.append("sender", options.sender);
      return this.transport.request<Media>("POST", "/media", { form, signal: options.signal });
    },
  };

  readonly senders = {
    /** GET /senders: the active senders. */
    list: async (): Promise<ListResult<Sender>> =>
      listResult(await this.transport.request<ListEnvelope<Sender>>("GET", "/senders")),
    /** GET /senders/{id}/templates: the sender's approved templates. */
    templates: async (senderId: string): Promise<ListResult<Template>> =>
      listResult(
        await this.transport.request<ListEnvelope<Template>>("GET", path`/senders/${senderId}/templates`),
      ),
  };

  readonly contacts = {
    /** GET /contacts/{id}, with its messaging window. */
    get: (contactId: string): Promise<Contact> =>
      this.transport.request<Contact>("GET", path`/contacts/${contactId}`),
    /** GET /contacts?phone=: the contact of an E.164 number; ApiError `resource_missing` (404) when none. */
    findByPhone: (phone: string): Promise<Contact> =>
      this.transport.request<Contact>("GET", "/contacts", { query: { phone } }),
    /**
     * POST /contacts/{id}/opt_out (scope `messaging:send`): nothing is sent to the contact from now
     * on (a send is refused with ApiError `recipient_opted_out`, 409); `messaging.opted_out` is true.
     * Idempotent: an opted-out contact keeps its first opt-out.
     */
    optOut: (contactId: string): Promise<Contact> =>
      this.transport.request<Contact>("POST", path`/contacts/${contactId}/opt_out`),
    /** POST /contacts/{id}/opt_in (scope `messaging:send`): the contact may be messaged again; only with their consent. */
    optIn: (contactId: string): Promise<Contact> =>
      this.transport.request<Contact>("POST", path`/contacts/${contactId}/opt_in`),
    /** GET /contacts/{id}/messages, every page followed. */
    history: (contactId: string, options: HistoryOptions = {}): AsyncGenerator<HistoryMessage> =>
      walkNewestFirst(
        options.order ?? "asc",
        (before) =>
          this.transport.request<ListEnvelope<HistoryMessage>>("GET", path`/contacts/${contactId}/messages`, {
            query: { order: "desc", limit: options.pageSize, before },
            signal: options.signal,
          }),
        // History items of a contact always have an id (null only on imports from before ids).
        (message) => message.id ?? "",
        (message) => message.id ?? `${message.created}:${message.preview}`,
      ),
  };

  readonly conversations = {
    /** GET /conversations, every page followed. */
    list: (options: ConversationsOptions = {}): AsyncGenerator<Conversation> =>
      walkNewestFirst(
        options.order ?? "desc",
        (before) =>
          this.transport.request<ListEnvelope<Conversation>>("GET", "/conversations", {
            query: { order: "desc", limit: options.pageSize ?? 100, before },
            signal: options.signal,
          }),
        (conversation) => conversation.last_message.created,
        (conversation) => conversation.contact.id,
      ),
  };

  readonly feed = {
    /** GET /messages followed for as long as it is iterated (see FeedOptions). */
    consume: (options: FeedOptions = {}): AsyncGenerator<FeedMessage> => consumeFeed(this.transport, options),
  };
}
