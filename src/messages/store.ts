import { CompiledQuery } from "kysely";
import type { ArrayElement } from "../db/array-literal.ts";
import type { Db } from "../db/connect.ts";
import { newId } from "../ids.ts";

/**
 * The one writer of new messages: accepted sends (accept-batch.ts) and received messages
 * (inbound/finalize.ts) alike. Given a batch, it records the sends' Idempotency-Keys, upserts the
 * contacts it names by phone, inserts the messages, updates the conversation summaries and hands
 * the messages to the feed, all in one statement, and returns the rows it wrote.
 */

export interface NewMessage {
  id: string;
  tenantId: string;
  senderId: string;
  direction: "inbound" | "outbound";
  /**
   * An existing contact (a send naming it, or one src/contacts/identity.ts resolved); without one,
   * the contact of (tenant, phone) is found or created, or, without a phone, the contact of
   * (tenant, userId) (a send to a BSUID no contact has had: the recipient's lookup found none).
   */
  contactId?: string;
  /** E.164; null with a contactId, or with a userId. */
  phone: string | null;
  /** The BSUID of a send to a user no contact has had yet (with a null phone and no contactId). */
  userId?: string | null;
  /** Names a contact that has no name yet (the first name of the batch wins). */
  contactName: string | null;
  /** Moves the contact's 24-hour window, never backwards (a received, non-system message). */
  windowFrom: Date | null;
  type: string;
  preview: string;
  text: string | null;
  mediaType: string | null;
  mediaFilename: string | null;
  /** The provider's id of a received message's media (sql/023); absent or null otherwise. */
  mediaId?: string | null;
  /** `accepted` for a send (`scheduled` with a send_at), null for a received message. */
  status: "accepted" | "scheduled" | null;
  applicationId: string | null;
  /** JSON of what the send worker sends. */
  content: string | null;
  providerMessageId: string | null;
  createdAt: Date;
  /** In the conversation summary, the feed and history; a system message is stored only (src/channel/system-messages.ts). */
  visible: boolean;
  /** A send's Idempotency-Key: the message is written only if its record is (accept-batch.ts). */
  idempotency?: { key: string; fingerprint: Buffer };
  /** A send's `client_reference` (DESIGN §13). */
  clientReference?: string | null;
  /** A scheduled send's time (status `scheduled`), its `valid_for` and the instant it expires. */
  sendAt?: Date | null;
  validFor?: number | null;
  expiresAt?: Date | null;
}

/** Why a message of the batch was not written. */
export type NotStored =
  /** its Idempotency-Key is held by a live record */
  | "idempotency-taken"
  /** a send to a contact who opted out (DESIGN §13) */
  | "opted-out";

export interface StoredMessage {
  id: string;
  seq: number;
  contactId: string;
  tenantId: string;
}

/** The batch's columns, in parameter order ($1 to $28): the statement's and batchRow's one list. */
const BATCH_COLUMNS = [
  ["id", "text"],
  ["tenant_id", "text"],
  ["contact_id", "text"],
  ["new_contact_id", "text"],
  ["phone", "text"],
  ["user_id", "text"],
  ["contact_name", "text"],
  ["sender_id", "text"],
  ["direction", "text"],
  ["type", "text"],
  ["preview", "text"],
  ["text", "text"],
  ["media_type", "text"],
  ["media_filename", "text"],
  ["status", "text"],
  ["application_id", "text"],
  ["content", "text"],
  ["created_at", "timestamptz"],
  ["window_from", "timestamptz"],
  ["visible", "bool"],
  ["idempotency_key", "text"],
  ["request_hash", "text"],
  ["provider_message_id", "text"],
  ["client_reference", "text"],
  ["send_at", "timestamptz"],
  ["valid_for", "int"],
  ["expires_at", "timestamptz"],
  ["media_id", "text"],
] as const;
/** A message as STORE_MESSAGES's columns: batchRow must give every column, and no other. */
type BatchRow = Record<(typeof BATCH_COLUMNS)[number][0], ArrayElement>;
/** The parameter after the columns: when an Idempotency-Key record has expired. */
const IDEMPOTENCY_EXPIRED = `$${BATCH_COLUMNS.length + 1}`;

// ONE statement writes a batch (atomic on its own: no BEGIN/COMMIT round trips when the caller has no
// transaction of its own). It takes the batch as one array per column (BATCH_COLUMNS, each one
// parameter, which src/db/connect.ts sends as one literal), so its text is the same for every batch
// size and it is prepared once per connection (src/db/connect.ts).
// Postgres reads arrays at a third of what json_to_recordset cost it for the same rows.
// Rows are written in the arrays' order (WITH ORDINALITY): messages get their seq in the batch's
// order; idempotency keys, contacts and conversations are written sorted, so concurrent batches lock
// rows in one order.
//
// - blocked: sends by phone number to a contact who opted out (a send naming its contact read the
//   contact's opt-out when it looked it up, src/messages/accept.ts; one opting out since then fails
//   at the send claim): written nowhere, not even their Idempotency-Key;
// - idem: the Idempotency-Keys of the batch's sends (a key taken by a live record keeps its message
//   out of every table; a record past its 24 hours (IDEMPOTENCY_EXPIRED) may be taken over);
// - contact: one row per (tenant, phone) without a contact id: created, or named if it has no name,
//   its 24-hour window moved (GREATEST ignores NULL: a send or a system message leaves it);
// - user_contact, user_ids: a send to a BSUID no contact has had: the contact of (tenant, user_id);
// - windows: the 24-hour window of contacts named by id (received messages: finalize resolved them);
// - inserted: the messages; conversation: the summary per contact (the newest message wins
//   whatever order rows arrive in; an outbound message resets `unread`, DESIGN §3, an inbound one
//   newer than our last outbound message and the panel's last look adds to it); feed: the feed
//   hand-off, each row stamped with its shard (the count read once, sql/013).
const STORE_MESSAGES = `
WITH batch AS MATERIALIZED (
  SELECT * FROM unnest(${BATCH_COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(", ")})
    WITH ORDINALITY AS r(${BATCH_COLUMNS.map(([name]) => name).join(", ")}, n)
), blocked AS MATERIALIZED (
  SELECT b.id FROM batch b
  JOIN contacts c ON c.tenant_id = b.tenant_id AND c.channel = 'whatsapp' AND c.phone = b.phone
  WHERE b.direction = 'outbound' AND b.contact_id IS NULL AND c.opted_out_at IS NOT NULL
  UNION ALL
  SELECT b.id FROM batch b
  JOIN contacts c ON c.tenant_id = b.tenant_id AND c.user_id = b.user_id AND c.merged_into IS NULL
  WHERE b.direction = 'outbound' AND b.contact_id IS NULL AND b.phone IS NULL AND c.opted_out_at IS NOT NULL
), idem AS (
  INSERT INTO idempotency_keys (application_id, key, tenant_id, request_hash, message_id, created_at)
  SELECT application_id, idempotency_key, tenant_id, decode(request_hash, 'hex'), id, created_at
  FROM batch WHERE idempotency_key IS NOT NULL AND id NOT IN (SELECT id FROM blocked)
  ORDER BY application_id, idempotency_key
  ON CONFLICT (application_id, key) DO UPDATE SET
    request_hash = excluded.request_hash, message_id = excluded.message_id,
    created_at = excluded.created_at, tenant_id = excluded.tenant_id
    WHERE idempotency_keys.created_at < ${IDEMPOTENCY_EXPIRED}
  RETURNING message_id
), live AS MATERIALIZED (
  SELECT * FROM batch
  WHERE (idempotency_key IS NULL OR id IN (SELECT message_id FROM idem))
    AND id NOT IN (SELECT id FROM blocked)
), contact AS (
  INSERT INTO contacts (id, tenant_id, phone, name, last_inbound_at)
  SELECT (array_agg(new_contact_id ORDER BY n))[1], tenant_id, phone,
    (array_agg(contact_name ORDER BY n) FILTER (WHERE contact_name IS NOT NULL))[1], max(window_from)
  FROM live WHERE contact_id IS NULL AND phone IS NOT NULL
  GROUP BY tenant_id, phone
  ORDER BY tenant_id, phone
  ON CONFLICT (tenant_id, channel, phone) DO UPDATE SET
    name = COALESCE(contacts.name, excluded.name),
    last_inbound_at = GREATEST(contacts.last_inbound_at, excluded.last_inbound_at)
  RETURNING id, tenant_id, phone
), user_contact AS (
  INSERT INTO contacts (id, tenant_id, user_id, name)
  SELECT (array_agg(new_contact_id ORDER BY n))[1], tenant_id, user_id,
    (array_agg(contact_name ORDER BY n) FILTER (WHERE contact_name IS NOT NULL))[1]
  FROM live WHERE contact_id IS NULL AND phone IS NULL
  GROUP BY tenant_id, user_id
  ORDER BY tenant_id, user_id
  ON CONFLICT (tenant_id, user_id) WHERE user_id IS NOT NULL AND merged_into IS NULL DO UPDATE SET
    name = COALESCE(contacts.name, excluded.name)
  RETURNING id, tenant_id, user_id
), user_ids AS (
  INSERT INTO contact_user_ids (tenant_id, user_id, contact_id)
  SELECT tenant_id, user_id, id FROM user_contact ORDER BY tenant_id, user_id
  ON CONFLICT DO NOTHING
), windows AS (
  -- A resolved contact's 24-hour window (received messages, src/contacts/identity.ts resolved
  -- them), moved only forwards; contacts locked in id order.
  UPDATE contacts c SET last_inbound_at = w.at
  FROM (SELECT contact_id, max(window_from) AS at FROM live
        WHERE contact_id IS NOT NULL AND window_from IS NOT NULL
        GROUP BY contact_id ORDER BY contact_id) w
  WHERE c.id = w.contact_id AND (c.last_inbound_at IS NULL OR c.last_inbound_at < w.at)
), inserted AS (
  INSERT INTO messages (id, tenant_id, contact_id, sender_id, direction, type, preview, text, media_type,
    media_filename, status, application_id, content, provider_message_id, client_reference, created_at,
    parked, send_at, valid_for, expires_at, media_id)
  SELECT l.id, l.tenant_id, COALESCE(l.contact_id, c.id, u.id), l.sender_id, l.direction, l.type, l.preview,
    l.text, l.media_type, l.media_filename, l.status, l.application_id, l.content::jsonb,
    l.provider_message_id, l.client_reference, l.created_at,
    CASE WHEN l.status = 'scheduled' THEN 'scheduled' END, l.send_at, l.valid_for, l.expires_at, l.media_id
  FROM live l
  LEFT JOIN contact c ON l.contact_id IS NULL AND c.tenant_id = l.tenant_id AND c.phone = l.phone
  LEFT JOIN user_contact u ON l.contact_id IS NULL AND l.phone IS NULL AND u.tenant_id = l.tenant_id
    AND u.user_id = l.user_id
  ORDER BY l.n
  RETURNING id, seq, contact_id, tenant_id, created_at, direction, status
), visible AS (
  SELECT i.* FROM inserted i JOIN live l ON l.id = i.id WHERE l.visible
), conversation AS (
  INSERT INTO conversations AS c
    (contact_id, tenant_id, last_message_seq, last_message_at, last_outbound_at, unread)
  SELECT DISTINCT ON (contact_id) contact_id, tenant_id, seq, created_at, outbound_at,
    CASE WHEN outbound_at IS NOT NULL THEN 0 ELSE inbound END
  FROM (SELECT v.*,
          max(created_at) FILTER (WHERE direction = 'outbound') OVER (PARTITION BY contact_id) AS outbound_at,
          count(*) FILTER (WHERE direction = 'inbound') OVER (PARTITION BY contact_id) AS inbound
        FROM visible v) per_contact
  ORDER BY contact_id, created_at DESC, seq DESC
  ON CONFLICT (contact_id) DO UPDATE SET
    last_message_seq = CASE WHEN (excluded.last_message_at, excluded.last_message_seq)
      > (c.last_message_at, c.last_message_seq) THEN excluded.last_message_seq ELSE c.last_message_seq END,
    last_message_at = GREATEST(c.last_message_at, excluded.last_message_at),
    last_outbound_at = GREATEST(c.last_outbound_at, excluded.last_outbound_at),
    unread = CASE WHEN excluded.last_outbound_at IS NOT NULL THEN 0
      WHEN excluded.last_message_at > COALESCE(GREATEST(c.last_outbound_at, c.panel_read_at), '-infinity')
        THEN c.unread + excluded.unread
      ELSE c.unread END
), feed AS (
  INSERT INTO feed_pending (message_id, tenant_id, shard)
  SELECT id, tenant_id, feed_shard_of(tenant_id, (SELECT shards FROM feed_shards)) FROM visible
), received AS (
  -- The event log (DESIGN §12, sql/016): a customer's message, never a system_ one.
  INSERT INTO event_pending (tenant_id, shard, type, message_id, status)
  SELECT tenant_id, feed_shard_of(tenant_id, (SELECT shards FROM feed_shards)), 'message.received', id, status
  FROM visible WHERE direction = 'inbound' ORDER BY seq
)
SELECT id, seq, contact_id, tenant_id, false AS opted_out FROM inserted
UNION ALL
SELECT id, NULL, NULL, NULL, true FROM blocked`;

/**
 * A message as a row of STORE_MESSAGES's columns (absent keys are NULL). Instants go as ISO text,
 * which goes in the column's literal as it is.
 */
function batchRow(m: NewMessage): BatchRow {
  return {
    id: m.id,
    tenant_id: m.tenantId,
    contact_id: m.contactId,
    new_contact_id: m.contactId ? undefined : newId("ctc"),
    phone: m.phone,
    user_id: m.userId,
    contact_name: m.contactName,
    sender_id: m.senderId,
    direction: m.direction,
    type: m.type,
    preview: m.preview,
    text: m.text,
    media_type: m.mediaType,
    media_filename: m.mediaFilename,
    status: m.status,
    application_id: m.applicationId,
    content: m.content,
    created_at: m.createdAt.toISOString(),
    window_from: m.windowFrom?.toISOString(),
    visible: m.visible,
    idempotency_key: m.idempotency?.key,
    request_hash: m.idempotency?.fingerprint.toString("hex"),
    provider_message_id: m.providerMessageId,
    client_reference: m.clientReference,
    send_at: m.sendAt?.toISOString(),
    valid_for: m.validFor,
    expires_at: m.expiresAt?.toISOString(),
    media_id: m.mediaId,
  };
}

/** The batch's rows as one array per column, in BATCH_COLUMNS's order. */
function batchColumns(rows: readonly BatchRow[]): ArrayElement[][] {
  return BATCH_COLUMNS.map(([name]) => rows.map((row) => row[name]));
}

/** One precompiled statement's rows, with this batch's parameters. */
async function run<Row>(db: Db, text: string, parameters: unknown[]): Promise<Row[]> {
  return (await db.executeQuery<Row>(CompiledQuery.raw(text, parameters))).rows;
}

export interface StoreOptions {
  /** An Idempotency-Key record older than this may be taken over by a message of the batch. */
  idempotencyExpiredBefore?: Date;
}

/**
 * Writes the batch in ONE statement, in `db` or the caller's transaction. The rows come back in the
 * batch's order, or why one was not written (NotStored; the batch must not carry one key twice).
 */
export async function storeMessages(
  db: Db,
  batch: readonly NewMessage[],
  options: StoreOptions = {},
): Promise<(StoredMessage | NotStored)[]> {
  if (batch.length === 0) return [];
  const rows = await run<{
    id: string;
    seq: number;
    contact_id: string;
    tenant_id: string;
    opted_out: boolean;
  }>(db, STORE_MESSAGES, [
    ...batchColumns(batch.map(batchRow)),
    options.idempotencyExpiredBefore ?? new Date(0),
  ]);
  const byId = new Map(rows.map((row) => [row.id, row]));
  return batch.map((message) => {
    const row = byId.get(message.id);
    if (row?.opted_out) return "opted-out";
    if (!row) {
      if (message.idempotency) return "idempotency-taken";
      throw new Error("storeMessages: the message insert returned no row");
    }
    return { id: row.id, seq: Number(row.seq), contactId: row.contact_id, tenantId: row.tenant_id };
  });
}
