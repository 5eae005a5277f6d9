import { CompiledQuery } from "kysely";
import { touchConversations } from "../conversations/summary.ts";
import type { Db } from "../db/connect.ts";
import { newId } from "../ids.ts";

/**
 * The one writer of new messages: accepted sends (accept-batch.ts) and received messages
 * (inbound/finalize.ts) alike. Given a batch inside the caller's transaction, it upserts the
 * contacts it names by phone, inserts the messages, updates the conversation summaries and hands
 * the messages to the feed, with one multi-row statement each, and returns the rows it wrote.
 */

export interface NewMessage {
  id: string;
  tenantId: string;
  senderId: string;
  direction: "inbound" | "outbound";
  /** An existing contact; without one, the contact of (tenant, phone) is found or created. */
  contactId?: string;
  phone: string;
  /** Names a contact that has no name yet (the first name of the batch wins). */
  contactName: string | null;
  /** Moves the contact's 24-hour window, never backwards (a received, non-system message). */
  windowFrom: Date | null;
  type: string;
  preview: string;
  text: string | null;
  mediaType: string | null;
  mediaFilename: string | null;
  /** `accepted` for a send, null for a received message. */
  status: "accepted" | null;
  applicationId: string | null;
  /** JSON of what the send worker sends. */
  content: string | null;
  providerMessageId: string | null;
  createdAt: Date;
  /** In the conversation summary and the feed; system messages are history only. */
  visible: boolean;
}

export interface StoredMessage {
  id: string;
  seq: number;
  contactId: string;
  tenantId: string;
}

// Each statement takes one array per column (unnest), so its text is the same for every batch size
// and nothing is built per batch. Insert order follows the arrays (WITH ORDINALITY): contacts are
// locked in sorted order, and messages get their seq in the batch's order.

// Known already (or created a moment ago by a twin): name it if it has no name, and move its window
// (GREATEST ignores NULL: a send, or a system message, leaves the window where it was).
const UPSERT_CONTACTS = `
INSERT INTO contacts (id, tenant_id, phone, name, last_inbound_at)
SELECT id, tenant_id, phone, name, last_inbound_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])
  WITH ORDINALITY AS r(id, tenant_id, phone, name, last_inbound_at, n)
ORDER BY n
ON CONFLICT (tenant_id, channel, phone) DO UPDATE SET
  name = COALESCE(contacts.name, excluded.name),
  last_inbound_at = GREATEST(contacts.last_inbound_at, excluded.last_inbound_at)
RETURNING id, tenant_id, phone`;

const INSERT_MESSAGES = `
INSERT INTO messages (id, tenant_id, contact_id, sender_id, direction, type, preview, text, media_type,
  media_filename, status, application_id, content, provider_message_id, created_at)
SELECT id, tenant_id, contact_id, sender_id, direction, type, preview, text, media_type,
  media_filename, status, application_id, content::jsonb, provider_message_id, created_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
  $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
  $15::timestamptz[])
  WITH ORDINALITY AS r(id, tenant_id, contact_id, sender_id, direction, type, preview, text, media_type,
    media_filename, status, application_id, content, provider_message_id, created_at, n)
ORDER BY n
RETURNING id, seq, contact_id, tenant_id`;

/** INSERT_MESSAGES's parameters, in order. */
const MESSAGE_COLUMNS = [
  "id",
  "tenantId",
  "contactId",
  "senderId",
  "direction",
  "type",
  "preview",
  "text",
  "mediaType",
  "mediaFilename",
  "status",
  "applicationId",
  "content",
  "providerMessageId",
  "createdAt",
] as const satisfies readonly (keyof NewMessage)[];

// The shard count is read once for the statement (sql/013), not by a trigger for every row.
const INSERT_FEED_PENDING = `
INSERT INTO feed_pending (message_id, tenant_id, shard)
SELECT v.message_id, v.tenant_id, feed_shard_of(v.tenant_id, (SELECT shards FROM feed_shards))
FROM unnest($1::text[], $2::text[]) AS v(message_id, tenant_id)`;

/** One precompiled statement's rows, with this batch's parameters. */
export async function run<Row>(trx: Db, text: string, parameters: unknown[]): Promise<Row[]> {
  return (await trx.executeQuery<Row>(CompiledQuery.raw(text, parameters))).rows;
}

const keyOf = (tenantId: string, phone: string) => `${tenantId}\u0000${phone}`;

/** Writes the batch in `trx` (the caller's transaction); the rows come back in the batch's order. */
export async function storeMessages(trx: Db, batch: readonly NewMessage[]): Promise<StoredMessage[]> {
  if (batch.length === 0) return [];

  // One row per (tenant, phone): a statement may not update a row twice.
  const wanted = new Map<
    string,
    { tenantId: string; phone: string; name: string | null; windowFrom: Date | null }
  >();
  for (const message of batch) {
    if (message.contactId) continue;
    const key = keyOf(message.tenantId, message.phone);
    const row = wanted.get(key) ?? {
      tenantId: message.tenantId,
      phone: message.phone,
      name: null,
      windowFrom: null,
    };
    row.name ??= message.contactName;
    if (message.windowFrom && (!row.windowFrom || message.windowFrom > row.windowFrom))
      row.windowFrom = message.windowFrom;
    wanted.set(key, row);
  }
  const contactIds = new Map<string, string>();
  if (wanted.size > 0) {
    // Sorted, so concurrent batches lock contact rows in one order.
    const fresh = [...wanted.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, c]) => c);
    const contacts = await run<{ id: string; tenant_id: string; phone: string }>(trx, UPSERT_CONTACTS, [
      fresh.map(() => newId("ctc")),
      fresh.map((c) => c.tenantId),
      fresh.map((c) => c.phone),
      fresh.map((c) => c.name),
      fresh.map((c) => c.windowFrom),
    ]);
    for (const c of contacts) contactIds.set(keyOf(c.tenant_id, c.phone), c.id);
  }
  const contactOf = (message: NewMessage) => {
    const id = message.contactId ?? contactIds.get(keyOf(message.tenantId, message.phone));
    if (!id) throw new Error("storeMessages: the contact upsert returned no row");
    return id;
  };

  const inserted = await run<{ id: string; seq: number; contact_id: string; tenant_id: string }>(
    trx,
    INSERT_MESSAGES,
    MESSAGE_COLUMNS.map((column) =>
      column === "contactId" ? batch.map(contactOf) : batch.map((message) => message[column]),
    ),
  );
  const byId = new Map(inserted.map((row) => [row.id, row]));
  const stored = batch.map((message) => {
    const row = byId.get(message.id);
    if (!row) throw new Error("storeMessages: the message insert returned no row");
    return { id: row.id, seq: Number(row.seq), contactId: row.contact_id, tenantId: row.tenant_id };
  });

  const visible = stored.flatMap((row, i) => (batch[i]!.visible ? [{ row, message: batch[i]! }] : []));
  if (visible.length > 0) {
    await touchConversations(
      trx,
      visible.map(({ row, message }) => ({
        contactId: row.contactId,
        tenantId: row.tenantId,
        messageSeq: row.seq,
        messageAt: message.createdAt,
        direction: message.direction,
      })),
    );
    await run(trx, INSERT_FEED_PENDING, [
      visible.map(({ row }) => row.id),
      visible.map(({ row }) => row.tenantId),
    ]);
  }
  return stored;
}
