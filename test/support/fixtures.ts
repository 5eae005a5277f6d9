import { expect } from "bun:test";
import { sql } from "kysely";
import type { App } from "../../src/app.ts";
import type { WebhookAccount } from "../../src/channel/webhook-payloads.ts";
import type { Db } from "../../src/db/connect.ts";
import type { MessageFailure } from "../../src/db/schema.ts";
import { newId } from "../../src/ids.ts";
import { finalizeInbound, finalizePendingInbound } from "../../src/inbound/finalize.ts";
import { type NewMessage, storeMessages } from "../../src/messages/store.ts";
import { insertSender, type SenderRow } from "../../src/senders/repository.ts";
import { syncSenderTemplates } from "../../src/senders/template-sync.ts";
import type { InboundRequest } from "../../src/simulator/schemas.ts";
import { type CallResult, call, createTenantWithApp, eventually, getToken, type TestEnv } from "./index.ts";

/**
 * The things tests make: phone numbers, senders, a shop (tenant, application, token, sender), what
 * a customer writes, a send, and message rows, the latter written by the production writer
 * (src/messages/store.ts) so that a change of the messages table breaks one place.
 */

let phones = 0;

/** A phone number (E.164, a German mobile) no test of this process has used yet. */
export function freshPhone(): string {
  phones++;
  return `+49157${String(phones).padStart(8, "0")}`;
}

let senders = 0;

export interface SenderOptions {
  phoneNumber?: string;
  /** The provider's phone number id (the simulator takes any). */
  phoneNumberId?: string;
  wabaId?: string;
  accessToken?: string;
  name?: string | null;
  mps?: number;
  /** Sync the sender's templates from the provider (the simulator's catalogue). */
  templates?: boolean;
}

/** An active sender of the tenant, with numbers of its own unless given. */
export async function addSender(
  env: TestEnv,
  tenantId: string,
  options: SenderOptions = {},
): Promise<SenderRow> {
  senders++;
  const phoneNumberId = options.phoneNumberId ?? String(118_000_000_000_000 + senders);
  const sender = await insertSender(env.deps.db, env.config.providerTokenKey, {
    tenantId,
    phoneNumber: options.phoneNumber ?? `+1555${phoneNumberId.slice(-7)}`,
    providerPhoneNumberId: phoneNumberId,
    wabaId: options.wabaId ?? "218000000000001",
    accessToken: options.accessToken ?? "sim-token",
    name: options.name,
    mps: options.mps,
  });
  if (options.templates) await syncSenderTemplates(env.deps, sender);
  return sender;
}

/** Where the provider's webhooks for this sender come from (for buildWebhook). */
export function webhookAccount(sender: SenderRow): WebhookAccount {
  return {
    wabaId: sender.waba_id,
    phoneNumberId: sender.provider_phone_number_id,
    displayPhoneNumber: sender.phone_number.slice(1),
  };
}

export interface Shop {
  tenantId: string;
  token: string;
  clientId: string;
  clientSecret: string;
  sender: SenderRow;
  phoneNumberId: string;
  account: WebhookAccount;
}

/** A tenant with a messaging:read+send application (unless `scopes` says otherwise), its token, and one active sender. */
export async function createShop(
  env: TestEnv,
  name: string,
  options: Omit<NonNullable<Parameters<typeof createTenantWithApp>[1]>, "name"> & SenderOptions = {},
): Promise<Shop> {
  const { tenant, clientId, clientSecret } = await createTenantWithApp(env.deps, { ...options, name });
  const sender = await addSender(env, tenant.id, options);
  const token = await getToken(env.app, clientId, clientSecret);
  return {
    tenantId: tenant.id,
    token,
    clientId,
    clientSecret,
    sender,
    phoneNumberId: sender.provider_phone_number_id,
    account: webhookAccount(sender),
  };
}

export type InboundFields = Omit<InboundRequest, "phone_number_id">;

/**
 * The customer writes to the number `phoneNumberId`: the simulator posts the signed webhook, which
 * must be answered 200. Returns the provider's message id.
 */
export async function customerWrites(
  env: TestEnv,
  phoneNumberId: string,
  fields: InboundFields,
): Promise<string> {
  const response = await fetch(`${env.simulatorUrl}/_sim/inbound`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ phone_number_id: phoneNumberId, ...fields }),
  });
  const sent = (await response.json()) as { id: string; webhook_status: number };
  expect({ status: response.status, webhook: sent.webhook_status }).toEqual({ status: 200, webhook: 200 });
  return sent.id;
}

/** The customer writes to the shop's number (a signed webhook from the simulator), and the finalize step runs. */
export async function receive(
  env: TestEnv,
  shop: Pick<Shop, "phoneNumberId">,
  fields: InboundFields,
): Promise<{ messageId: string; contactId: string }> {
  const providerId = await customerWrites(env, shop.phoneNumberId, fields);
  const outcome = await finalizeInbound(env.deps.db, env.clock, providerId);
  if (!outcome) throw new Error(`inbound ${providerId} was not stored`);
  const row = await messageRow(env.deps.db, outcome.messageId);
  return { messageId: outcome.messageId, contactId: row.contact_id };
}

/**
 * Waits until the customer's message with this provider id is stored with `text`, running the
 * finalize step meanwhile as the finalize worker would (a failed run is tried again).
 */
export async function inboundStoredWithText(
  env: TestEnv,
  providerMessageId: string,
  text: string,
): Promise<void> {
  await eventually(async () => {
    await finalizePendingInbound(env.deps.db, env.clock).catch(() => undefined);
    const row = await env.deps.db
      .selectFrom("messages")
      .select("text")
      .where("provider_message_id", "=", providerMessageId)
      .executeTakeFirst();
    return row?.text === text;
  });
}

/** The simulator's next `count` sends fail with the Graph error `code` (POST /_sim/fail-next). */
export async function failNextSends(env: TestEnv, count: number, code: number): Promise<void> {
  const response = await fetch(`${env.simulatorUrl}/_sim/fail-next`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ count, code }),
  });
  expect(response.status).toBe(200);
}

/** A send the simulator took, as GET /_sim/sent lists it (the Graph API request's body in `payload`). */
export interface SimulatorSend {
  id: string;
  payload: {
    to?: string;
    biz_opaque_callback_data?: string;
    text?: { body: string };
    [field: string]: unknown;
  };
  /** When the simulator took it (its clock, ISO 8601). */
  received_at: string;
}

/** What the simulator took from the number `phoneNumberId`, in the order it took it. */
export async function simulatorSends(env: TestEnv, phoneNumberId: string): Promise<SimulatorSend[]> {
  const response = await fetch(`${env.simulatorUrl}/_sim/sent?phone_number_id=${phoneNumberId}`);
  return ((await response.json()) as { data: SimulatorSend[] }).data;
}

/** What the simulator took for one of our messages (whose id travels as biz_opaque_callback_data). */
export async function sentTo(
  env: TestEnv,
  phoneNumberId: string,
  messageId: string,
): Promise<SimulatorSend[]> {
  const sends = await simulatorSends(env, phoneNumberId);
  return sends.filter((send) => send.payload.biz_opaque_callback_data === messageId);
}

/** A template send's `template`: order_shipped, in the simulator's catalogue of every sender. */
export const ORDER_SHIPPED = {
  name: "order_shipped",
  language: "en",
  variables: { body: ["Ana", "A-1001"] },
};

/** POST /v2/messages as an integrator sends it; `key` goes in the Idempotency-Key header. */
export function postMessage(
  app: App,
  token: string,
  body: unknown,
  options: { key?: string; headers?: Record<string, string> } = {},
): Promise<CallResult> {
  return call(app, "POST", "/v2/messages", {
    body,
    token,
    headers: { ...(options.key !== undefined && { "idempotency-key": options.key }), ...options.headers },
  });
}

/** What a test reads back of a message row. */
export function messageRow(db: Db, id: string) {
  return db
    .selectFrom("messages")
    .select([
      "status",
      "failure",
      "send_attempts",
      "provider_message_id",
      "send_started_at",
      "text",
      "type",
      "contact_id",
    ])
    .where("id", "=", id)
    .executeTakeFirstOrThrow();
}

/** The messages sent to a contact (outbound), oldest first. */
export function outboundMessages(db: Db, contactId: string) {
  return db
    .selectFrom("messages")
    .select(["id", "type", "text", "application_id", "status"])
    .where("contact_id", "=", contactId)
    .where("direction", "=", "outbound")
    .orderBy("seq")
    .execute();
}

/** The status events the webhook store keeps for a provider id (until they are applied). */
export function statusEventsOf(db: Db, providerMessageId: string) {
  return db
    .selectFrom("status_events")
    .selectAll()
    .where("provider_message_id", "=", providerMessageId)
    .orderBy("id")
    .execute();
}

export interface MessageFields {
  tenantId: string;
  senderId: string;
  /** The contact; without one, the contact of `phone` is found or created. */
  contactId?: string;
  phone?: string;
  direction?: "inbound" | "outbound";
  type?: string;
  text?: string | null;
  preview?: string;
  /** `id`: the provider's media id (of a received file). */
  media?: { type: string; filename: string | null; id?: string | null };
  content?: Record<string, unknown> | null;
  providerMessageId?: string | null;
  createdAt?: Date;
  id?: string;
  /** False: stored only, out of the conversation summary and the feed (as a system message). */
  visible?: boolean;
  /** A scheduled send's time (with status `scheduled`). */
  sendAt?: Date;
  /**
   * Any status. One the writer does not make (past `accepted`) is set afterwards by a narrow UPDATE,
   * and so are `failure`, `sendStartedAt` and `retrying`.
   */
  status?: "accepted" | "scheduled" | "sent" | "delivered" | "read" | "failed" | null;
  failure?: MessageFailure | null;
  /** An attempt under way (or in doubt) since then. */
  sendStartedAt?: Date | null;
  /** Waiting for another attempt, as the send worker leaves a send it will retry. */
  retrying?: { attempts: number; notBefore: Date; lastError: MessageFailure };
}

/**
 * Messages written by the production writer (`storeMessages`: the row, the contact, the
 * conversation summary, the feed hand-off), default an outbound text "hello" accepted now. A state
 * the writer cannot make (a later status, a failure, an attempt under way) is then set by one narrow
 * UPDATE, as the send worker or a status webhook would leave it. Returns the ids in order.
 */
export async function storeMessageRows(db: Db, rows: readonly MessageFields[]): Promise<string[]> {
  const batch = rows.map((fields): NewMessage => {
    const direction = fields.direction ?? "outbound";
    const text = fields.text === undefined ? "hello" : fields.text;
    const createdAt = fields.createdAt ?? new Date();
    return {
      id: fields.id ?? newId("msg"),
      tenantId: fields.tenantId,
      senderId: fields.senderId,
      direction,
      contactId: fields.contactId,
      phone: fields.phone ?? (fields.contactId ? "" : missingContact()),
      contactName: null,
      windowFrom: direction === "inbound" && fields.visible !== false ? createdAt : null,
      type: fields.type ?? "text",
      preview: fields.preview ?? text ?? "",
      text,
      mediaType: fields.media?.type ?? null,
      mediaFilename: fields.media?.filename ?? null,
      mediaId: fields.media?.id ?? null,
      status: direction === "inbound" ? null : fields.status === "scheduled" ? "scheduled" : "accepted",
      applicationId: null,
      content: fields.content ? JSON.stringify(fields.content) : null,
      providerMessageId: fields.providerMessageId ?? null,
      createdAt,
      visible: fields.visible ?? true,
      sendAt: fields.sendAt ?? null,
    };
  });
  const stored = await storeMessages(db, batch);
  for (const [i, result] of stored.entries())
    if (typeof result === "string") throw new Error(`message ${batch[i]!.id} not stored: ${result}`);
  const later = rows.flatMap((fields, i) => {
    const written = batch[i]!;
    const status = fields.status === undefined ? written.status : fields.status;
    if (status === written.status && !fields.failure && !fields.sendStartedAt && !fields.retrying) return [];
    return [{ ...fields, id: written.id, status }];
  });
  const json = (value: unknown) => (value ? JSON.stringify(value) : null);
  if (later.length > 0)
    await sql`
      UPDATE messages m SET status = v.status, failure = v.failure::jsonb, send_started_at = v.started_at,
        send_attempts = v.attempts, send_not_before = v.not_before, last_error = v.last_error::jsonb
      FROM unnest(${later.map((r) => r.id)}::text[], ${later.map((r) => r.status)}::text[],
        ${later.map((r) => json(r.failure))}::text[], ${later.map((r) => r.sendStartedAt ?? null)}::timestamptz[],
        ${later.map((r) => r.retrying?.attempts ?? 0)}::int[],
        ${later.map((r) => r.retrying?.notBefore ?? null)}::timestamptz[],
        ${later.map((r) => json(r.retrying?.lastError))}::text[])
        AS v(id, status, failure, started_at, attempts, not_before, last_error)
      WHERE m.id = v.id`.execute(db);
  return batch.map((message) => message.id);
}

function missingContact(): never {
  throw new Error("storeMessageRows: give a contactId or a phone");
}

/** One message, as storeMessageRows writes it; returns its id. */
export async function storeMessage(db: Db, fields: MessageFields): Promise<string> {
  const [id] = await storeMessageRows(db, [fields]);
  return id!;
}

/**
 * `count` events of `type` (or of `types` in turn) appended to the shop's event log in one statement,
 * numbered as the sequencer numbers them (dense positions after event_heads, the head raised in the
 * same statement): a long log without a message for each event. Returns the last position.
 */
export async function appendLogEvents(
  db: Db,
  shop: Pick<Shop, "tenantId" | "sender">,
  type: string | readonly string[],
  count: number,
): Promise<number> {
  const types = typeof type === "string" ? [type] : [...type];
  const tenantId = shop.tenantId;
  const messageId = await storeMessage(db, { tenantId, senderId: shop.sender.id, phone: freshPhone() });
  const { rows } = await sql<{ last_seq: number }>`
    WITH head AS (
      INSERT INTO event_heads AS h (tenant_id, last_seq) VALUES (${tenantId}, ${count})
      ON CONFLICT (tenant_id) DO UPDATE SET last_seq = h.last_seq + excluded.last_seq
      RETURNING last_seq
    ), appended AS (
      INSERT INTO events (tenant_id, seq, id, type, message_id, status, created_at)
      SELECT ${tenantId}, head.last_seq - ${count} + n, 'evt_' || translate(gen_random_uuid()::text, '-', ''),
             (${types}::text[])[1 + (n - 1) % ${types.length}], ${messageId}, 'sent', now()
      FROM head, generate_series(1, ${count}) n
    )
    SELECT last_seq FROM head`.execute(db);
  return rows[0]?.last_seq ?? 0;
}
