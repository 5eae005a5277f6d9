import { expect } from "bun:test";
import { sql } from "kysely";
import { createDb } from "../src/db/connect.ts";
import type { MessageFailure } from "../src/db/schema.ts";
import { newId } from "../src/ids.ts";
import { finalizeInbound } from "../src/inbound/finalize.ts";
import { createLogger } from "../src/logger.ts";
import { insertSender, type SenderRow } from "../src/senders/repository.ts";
import {
  type FeedTenant,
  type LostNothingOptions,
  type LostNothingReport,
  runLostNothing,
} from "./lost-nothing.ts";
import { type CallResult, createTenantWithApp, getToken, type TestEnv } from "./support.ts";

/** Helpers for the reading-side tests (contacts, history, conversations, feed). */

let nextPhoneNumberId = 118_000_000_000_001;

export interface ReadingTenant {
  tenantId: string;
  token: string;
  clientId: string;
  clientSecret: string;
  sender: SenderRow;
  phoneNumberId: string;
}

/** A tenant with a messaging:read+send application, a token, and one active sender. */
export async function readingTenant(
  env: TestEnv,
  name: string,
  options: Omit<Parameters<typeof createTenantWithApp>[1], "name"> = {},
): Promise<ReadingTenant> {
  const { tenant, clientId, clientSecret } = await createTenantWithApp(env.deps, { ...options, name });
  const phoneNumberId = String(nextPhoneNumberId++);
  const sender = await insertSender(env.deps.db, env.config.providerTokenKey, {
    tenantId: tenant.id,
    phoneNumber: `+1555${phoneNumberId.slice(-7)}`,
    providerPhoneNumberId: phoneNumberId,
    wabaId: "218000000000001",
    accessToken: "sim-token",
  });
  const token = await getToken(env.app, clientId, clientSecret);
  return { tenantId: tenant.id, token, clientId, clientSecret, sender, phoneNumberId };
}

export interface InboundFields {
  from: string;
  type: "text" | "image" | "video" | "audio" | "document" | "system";
  text?: string;
  caption?: string;
  filename?: string;
  name?: string;
  /** Provider timestamp, Unix seconds. */
  timestamp?: number;
}

/** The customer writes: the simulator posts a signed webhook; returns the provider's message id. */
export async function postInbound(
  env: TestEnv,
  tenant: ReadingTenant,
  fields: InboundFields,
): Promise<string> {
  const response = await fetch(`${env.simulatorUrl}/_sim/inbound`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ phone_number_id: tenant.phoneNumberId, ...fields }),
  });
  const sent = (await response.json()) as { id: string; webhook_status: number };
  expect(sent.webhook_status).toBe(200);
  return sent.id;
}

/** The customer writes (a signed webhook from the simulator), and the finalize step runs. */
export async function receive(
  env: TestEnv,
  tenant: ReadingTenant,
  fields: InboundFields,
): Promise<{ messageId: string; contactId: string }> {
  const providerId = await postInbound(env, tenant, fields);
  const outcome = await finalizeInbound(env.deps.db, env.clock, providerId);
  if (!outcome) throw new Error(`inbound ${providerId} was not stored`);
  const row = await env.deps.db
    .selectFrom("messages")
    .select("contact_id")
    .where("id", "=", outcome.messageId)
    .executeTakeFirstOrThrow();
  return { messageId: outcome.messageId, contactId: row.contact_id };
}

export interface OutboundFields {
  contactId: string;
  type?: "text" | "template";
  text?: string | null;
  preview?: string;
  status?: "accepted" | "sent" | "delivered" | "read" | "failed";
  failure?: MessageFailure | null;
  media?: { type: string; filename: string | null };
  createdAt: Date;
  /** Null makes a legacy row (from before structured storage). */
  id?: string | null;
}

/**
 * An outbound message written the way the send-accept transaction writes it: the message, the
 * conversation summary (unread back to 0) and the feed hand-off, in one transaction.
 */
export async function insertOutbound(
  env: TestEnv,
  tenant: ReadingTenant,
  fields: OutboundFields,
): Promise<string | null> {
  const id = fields.id === undefined ? newId("msg") : fields.id;
  const text = fields.text === undefined ? "Your order has shipped." : fields.text;
  await env.deps.db.transaction().execute(async (trx) => {
    const inserted = await trx
      .insertInto("messages")
      .values({
        id,
        tenant_id: tenant.tenantId,
        contact_id: fields.contactId,
        sender_id: tenant.sender.id,
        direction: "outbound",
        type: fields.type ?? "text",
        preview: fields.preview ?? text ?? "",
        text,
        media_type: fields.media?.type ?? null,
        media_filename: fields.media?.filename ?? null,
        status: fields.status ?? "accepted",
        failure: fields.failure ? JSON.stringify(fields.failure) : null,
        content: null,
        created_at: fields.createdAt,
      })
      .returning("seq")
      .executeTakeFirstOrThrow();
    await trx
      .insertInto("conversations")
      .values({
        contact_id: fields.contactId,
        tenant_id: tenant.tenantId,
        last_message_seq: inserted.seq,
        last_message_at: fields.createdAt,
        last_outbound_at: fields.createdAt,
        unread: 0,
      })
      .onConflict((oc) =>
        oc.column("contact_id").doUpdateSet({
          last_message_seq: sql`CASE WHEN (excluded.last_message_at, excluded.last_message_seq) > (conversations.last_message_at, conversations.last_message_seq) THEN excluded.last_message_seq ELSE conversations.last_message_seq END`,
          last_message_at: sql`GREATEST(conversations.last_message_at, excluded.last_message_at)`,
          last_outbound_at: sql`GREATEST(conversations.last_outbound_at, excluded.last_outbound_at)`,
          unread: 0,
        }),
      )
      .execute();
    if (id !== null)
      await trx.insertInto("feed_pending").values({ message_id: id, tenant_id: tenant.tenantId }).execute();
  });
  return id;
}

/** A contact that never wrote (as a send to a new number creates it). */
export async function insertContact(
  env: TestEnv,
  tenant: ReadingTenant,
  phone: string,
  name: string | null = null,
) {
  return env.deps.db
    .insertInto("contacts")
    .values({ id: newId("ctc"), tenant_id: tenant.tenantId, phone, name })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** SPEC §7's envelope, whole. */
export function expectApiError(result: CallResult, status: number, code: string, param: string | null) {
  expect({ status: result.status, body: result.body }).toEqual({
    status,
    body: {
      error: {
        type:
          status === 401
            ? "authentication_error"
            : status === 403
              ? "permission_error"
              : "invalid_request_error",
        code,
        message: expect.any(String),
        param,
        request_id: result.headers.get("request-id"),
        doc_url: `http://localhost/v2/docs#${code}`,
      },
    },
  });
}

/** The same id with one letter's case flipped (ids are case-sensitive). */
export function flipCase(id: string): string {
  const start = id.indexOf("_") + 1;
  const at = start + id.slice(start).search(/[A-Za-z]/);
  const char = id[at]!;
  const flipped = char === char.toUpperCase() ? char.toLowerCase() : char.toUpperCase();
  return id.slice(0, at) + flipped + id.slice(at + 1);
}

export function epoch(date: Date): number {
  return Math.floor(date.getTime() / 1000);
}

/** A tenant for test/lost-nothing.ts: a reading tenant with one contact (`phone`). */
export async function lostNothingTenant(env: TestEnv, name: string, phone: string): Promise<FeedTenant> {
  const tenant = await readingTenant(env, name);
  const contact = await insertContact(env, tenant, phone);
  return {
    tenantId: tenant.tenantId,
    senderId: tenant.sender.id,
    contactId: contact.id,
    token: tenant.token,
  };
}

/**
 * Runs the lost-nothing check with its own pool of writers and asserts DESIGN §6's outcome: every
 * committed message seen by every reader of its tenant, nothing foreign or rolled back, and the order
 * of first sight the order of a full re-read.
 */
export async function expectLostNothing(
  env: TestEnv,
  options: Omit<LostNothingOptions, "app" | "db" | "logger">,
): Promise<LostNothingReport> {
  const writerDb = createDb(env.config.databaseUrl, { max: options.writers + options.sequencers + 4 });
  try {
    const report = await runLostNothing({
      ...options,
      app: env.app,
      db: writerDb,
      logger: createLogger("silent"),
    });
    expect(report.committed).toBeGreaterThan(options.writers * options.messagesPerWriter * 0.6);
    expect(report.rolledBack).toBeGreaterThan(0);
    expect(report.lost).toBe(0);
    expect(report.rereadsExact).toBe(true);
    for (const reader of report.readers) {
      expect(reader).toMatchObject({ missing: 0, foreign: 0, rolledBackSeen: 0, orderMatchesReread: true });
    }
    return report;
  } finally {
    await writerDb.destroy();
  }
}
