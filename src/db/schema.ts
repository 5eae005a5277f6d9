import type { ColumnType, Generated } from "kysely";
import type { MessageFailure } from "../channel/failure-codes.ts";

/** Kysely's view of the tables in sql/. Keep in step with the migrations. */
export interface Database {
  tenants: TenantsTable;
  applications: ApplicationsTable;
  schema_migrations: SchemaMigrationsTable;
  senders: SendersTable;
  templates: TemplatesTable;
  contacts: ContactsTable;
  contact_user_ids: ContactUserIdsTable;
  messages: MessagesTable;
  inbound_events: InboundEventsTable;
  status_events: StatusEventsTable;
  media: MediaTable;
  conversations: ConversationsTable;
  feed_pending: FeedPendingTable;
  feed_heads: FeedHeadsTable;
  feed_entries: FeedEntriesTable;
  feed_epoch: FeedEpochTable;
  event_pending: EventPendingTable;
  event_heads: FeedHeadsTable;
  events: EventsTable;
  feed_shards: FeedShardsTable;
  idempotency_keys: IdempotencyKeysTable;
  panel_users: PanelUsersTable;
  panel_sessions: PanelSessionsTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
}

type CreatedAt = ColumnType<Date, Date | undefined, never>;

export interface TenantsTable {
  id: string;
  name: string;
  daily_quota: number | null;
  /** Messages older than this many days are removed (src/maintenance/retention.ts). */
  message_retention_days: Generated<number>;
  created_at: CreatedAt;
}

export interface ApplicationsTable {
  client_id: string;
  tenant_id: string;
  name: string;
  secret_digest: Buffer;
  scopes: string[];
  read_limit: Generated<number>;
  send_limit: Generated<number>;
  revoked_at: Date | null;
  last_token_at: Date | null;
  created_at: CreatedAt;
  /** The replaced secret while it overlaps the new one (sql/021); both null or both set. */
  previous_secret_digest: ColumnType<Buffer | null, Buffer | null | undefined, Buffer | null>;
  previous_secret_expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}

export interface SchemaMigrationsTable {
  name: string;
  applied_at: ColumnType<Date, Date | undefined, never>;
}

export interface SendersTable {
  id: string;
  tenant_id: string;
  channel: Generated<string>;
  name: string | null;
  phone_number: string;
  provider_phone_number_id: string;
  waba_id: string;
  access_token: string;
  active: Generated<boolean>;
  /** Messages per second the send workers hand to the provider for this sender (token bucket). */
  mps: Generated<number>;
  templates_synced_at: Date | null;
  created_at: CreatedAt;
}

export interface TemplateVariables {
  body: string[];
  header: string[];
  buttons: string[];
}

export interface TemplatesTable {
  id: string;
  tenant_id: string;
  sender_id: string;
  provider_template_id: string | null;
  name: string;
  language: string;
  category: string;
  status: string;
  components: ColumnType<unknown[], string, string>;
  variables: ColumnType<TemplateVariables, string, string>;
  preview: string;
  header_format: string | null;
  updated_at: ColumnType<Date, Date | undefined, Date>;
  /** The provider's reason for a REJECTED template (sql/021); null otherwise. */
  rejected_reason: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface ContactsTable {
  id: string;
  tenant_id: string;
  channel: Generated<string>;
  /** E.164; null when the provider withholds it (a user with a username, DESIGN §14). */
  phone: string | null;
  /** The business-scoped user id (BSUID, `CC.…`) the provider uses now. */
  user_id: ColumnType<string | null, string | null | undefined, string | null>;
  parent_user_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** Shown, never used as a key: users change it. */
  username: ColumnType<string | null, string | null | undefined, string | null>;
  /** Set when this contact was merged into another (one person): the survivor's id. */
  merged_into: ColumnType<string | null, string | null | undefined, string | null>;
  name: string | null;
  last_inbound_at: Date | null;
  /** Opted out (DESIGN §13): by keyword, provider failure 131050 or by hand; null = may be messaged. */
  opted_out_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: CreatedAt;
}

/** Every BSUID a contact has had (its current one too): an old one still finds the person. */
export interface ContactUserIdsTable {
  tenant_id: string;
  user_id: string;
  contact_id: string;
  created_at: CreatedAt;
}

/** `failure` and `last_error`: `{code, message, retryable}`, a code of the catalogue (src/channel/failure-codes.ts). */
export type { MessageFailure };

export interface MessagesTable {
  seq: Generated<number>;
  id: string | null;
  tenant_id: string;
  contact_id: string;
  sender_id: string | null;
  direction: "inbound" | "outbound";
  type: string;
  preview: string;
  text: string | null;
  media_type: string | null;
  media_filename: string | null;
  /** The provider's id of a received message's media (sql/023): how the panel fetches it. */
  media_id: ColumnType<string | null, string | null | undefined, string | null>;
  status: string | null;
  failure: ColumnType<MessageFailure | null, string | null, string | null>;
  application_id: string | null;
  content: ColumnType<Record<string, unknown> | null, string | null, string | null>;
  provider_message_id: string | null;
  /** The sender's own reference of a send (DESIGN §13), echoed wherever the message is shown. */
  client_reference: ColumnType<string | null, string | null | undefined, string | null>;
  send_attempts: Generated<number>;
  /** Of send_attempts, those the provider refused as throttling (never counted against SEND_ATTEMPTS). */
  send_throttled: Generated<number>;
  send_started_at: Date | null;
  /** A retryable failure is not tried again before this. */
  send_not_before: Date | null;
  /** Out of delivery (sql/019): `scheduled` until send_at, `canceled` for good; null = in delivery. */
  parked: ColumnType<"scheduled" | "canceled" | null, "scheduled" | "canceled" | null | undefined>;
  send_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  valid_for: ColumnType<number | null, number | null | undefined, number | null>;
  /** Acceptance (or send_at) + valid_for: not handed to the provider after this. */
  expires_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  /** The error of the latest attempt to be retried (sql/020); null once sent or failed for good. */
  last_error: ColumnType<MessageFailure | null, string | null | undefined, string | null>;
  created_at: Date;
  updated_at: ColumnType<Date, Date | undefined, Date>;
}

export interface InboundEventsTable {
  provider_message_id: string;
  tenant_id: string;
  sender_id: string;
  payload: ColumnType<
    { message: Record<string, unknown>; contact: Record<string, unknown> | null },
    string,
    string
  >;
  received_at: CreatedAt;
  finalized_at: Date | null;
  message_id: string | null;
}

export interface StatusEventsTable {
  id: Generated<number>;
  provider_message_id: string;
  status: string;
  provider_timestamp: Date;
  errors: ColumnType<unknown[] | null, string | null, string | null>;
  client_reference: string | null;
  /** The sender of the webhook's phone_number_id; null on events stored before 006. */
  sender_id: string | null;
  /** Who the provider says received it (DESIGN §14); null on events stored before 033. */
  recipient_phone: string | null;
  recipient_user_id: string | null;
  recipient_parent_user_id: string | null;
  received_at: CreatedAt;
}

export interface MediaTable {
  id: string;
  tenant_id: string;
  sender_id: string;
  type: "image" | "video" | "document";
  mime_type: string;
  filename: string | null;
  size_bytes: number;
  provider_media_id: string;
  created_at: Date;
  expires_at: Date;
}

export interface ConversationsTable {
  contact_id: string;
  tenant_id: string;
  last_message_seq: number;
  last_message_at: Date;
  last_outbound_at: Date | null;
  panel_read_at: Date | null;
  unread: Generated<number>;
}

export interface FeedPendingTable {
  message_id: string;
  tenant_id: string;
  queued_at: CreatedAt;
  /** Named by the insert of messages/store.ts, or else set by a trigger (sql/010, sql/013). */
  shard: Generated<number>;
}

export interface FeedHeadsTable {
  tenant_id: string;
  last_seq: number;
}

export interface FeedEntriesTable {
  tenant_id: string;
  seq: number;
  message_id: string;
}

/** The event log (DESIGN §12, sql/016): written in the statements that change a message. */
export interface EventPendingTable {
  id: Generated<number>;
  tenant_id: string;
  shard: number;
  type: string;
  /** The message of a message.* event; null for a contact.merged one (sql/032). */
  message_id: string | null;
  /** The contact of an event about a contact (contact.merged: the survivor). */
  contact_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** What such an event carries besides its contact (contact.merged: `{merged: [ids]}`). */
  data: ColumnType<unknown | null, string | null | undefined, string | null>;
  status: string | null;
  failure: unknown | null;
  created_at: Generated<Date>;
}

export interface EventsTable {
  tenant_id: string;
  seq: number;
  id: string;
  type: EventType;
  message_id: string | null;
  contact_id: ColumnType<string | null, string | null | undefined, string | null>;
  data: ColumnType<{ merged: string[] } | null, string | null | undefined, string | null>;
  status: string | null;
  failure: MessageFailure | null;
  created_at: Date;
}

export type EventType =
  | "message.received"
  | "message.sent"
  | "message.delivered"
  | "message.read"
  | "message.failed"
  | "message.canceled"
  | "contact.merged";

export interface FeedEpochTable {
  singleton: Generated<boolean>;
  epoch: number;
}

export interface FeedShardsTable {
  singleton: Generated<boolean>;
  shards: number;
}

export interface IdempotencyKeysTable {
  application_id: string;
  key: string;
  tenant_id: string;
  request_hash: Buffer;
  message_id: string;
  created_at: Date;
}

export interface PanelUsersTable {
  id: string;
  tenant_id: string;
  email: string;
  password_hash: string;
  created_at: CreatedAt;
}

export interface PanelSessionsTable {
  token_digest: Buffer;
  user_id: string;
  tenant_id: string;
  created_at: CreatedAt;
  expires_at: Date;
}

/** Webhook endpoints (DESIGN §12, sql/017): each reads the event log from its own cursor. */
export interface WebhookEndpointsTable {
  id: string;
  tenant_id: string;
  url: string;
  /** The types it receives; null: every type, including types added later (sql/031). */
  events: EventType[] | null;
  description: string | null;
  status: Generated<"enabled" | "disabled">;
  disabled_reason: string | null;
  secret: string;
  /** The one replaced secret that may still sign (sealed), until its expiry; both null or both set (sql/030). */
  previous_secret: string | null;
  previous_secret_expires_at: Date | null;
  cursor_seq: number;
  generation: Generated<number>;
  lease: string | null;
  retry_at: Date | null;
  paused_until: Date | null;
  last_success_at: Date | null;
  last_failure_at: Date | null;
  last_failure_status: number | null;
  last_failure_error: string | null;
  created_at: CreatedAt;
}

/** Past an endpoint's cursor: events acknowledged out of order, and events waiting for a retry. */
export interface WebhookDeliveriesTable {
  endpoint_id: string;
  seq: number;
  acknowledged: boolean;
  attempts: Generated<number>;
  first_failed_at: Date | null;
  next_attempt_at: Date | null;
}
