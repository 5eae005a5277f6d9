import { expect } from "bun:test";
import { createDb } from "../../src/db/connect.ts";
import type { MessageFailure } from "../../src/db/schema.ts";
import { newId } from "../../src/ids.ts";
import { createLogger } from "../../src/logger.ts";
import { createShop, type MessageFields, type Shop, storeMessage } from "./fixtures.ts";
import { type CallResult, expectApiError, type TestEnv } from "./index.ts";
import {
  type FeedTenant,
  type LostNothingOptions,
  type LostNothingReport,
  runLostNothing,
} from "./lost-nothing.ts";

/** Helpers for the reading-side tests (contacts, history, conversations, feed). */

export interface OutboundFields {
  contactId: string;
  type?: "text" | "template";
  text?: string | null;
  preview?: string;
  status?: "accepted" | "sent" | "delivered" | "read" | "failed";
  failure?: MessageFailure | null;
  media?: { type: string; filename: string | null };
  retrying?: MessageFields["retrying"];
  createdAt: Date;
  /** Null makes a legacy row (from before structured storage: no id, never in the feed). */
  id?: string | null;
}

/**
 * An outbound message of the shop's sender as the send-accept transaction writes it (the message,
 * the conversation summary with unread back to 0, the feed hand-off), in the status asked for.
 */
export async function insertOutbound(
  env: TestEnv,
  shop: Pick<Shop, "tenantId" | "sender">,
  fields: OutboundFields,
): Promise<string | null> {
  const legacy = fields.id === null;
  const id = await storeMessage(env.deps.db, {
    ...fields,
    id: fields.id ?? undefined,
    tenantId: shop.tenantId,
    senderId: shop.sender.id,
    text: fields.text === undefined ? "Your order has shipped." : fields.text,
    visible: !legacy,
  });
  if (!legacy) return id;
  await env.deps.db.updateTable("messages").set({ id: null }).where("id", "=", id).execute();
  return null;
}

/** A contact that never wrote (as a send to a new number creates it). */
export async function insertContact(
  env: TestEnv,
  tenant: Pick<Shop, "tenantId">,
  phone: string,
  name: string | null = null,
) {
  return env.deps.db
    .insertInto("contacts")
    .values({ id: newId("ctc"), tenant_id: tenant.tenantId, phone, name })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The same id with one letter's case flipped (ids are case-sensitive). */
export function flipCase(id: string): string {
  const start = id.indexOf("_") + 1;
  const at = start + id.slice(start).search(/[A-Za-z]/);
  const char = id[at]!;
  const flipped = char === char.toUpperCase() ? char.toLowerCase() : char.toUpperCase();
  return id.slice(0, at) + flipped + id.slice(at + 1);
}

/**
 * A list's `limit` (SPEC §7): 1 gives one item and has_more, `max` gives all `total` items there
 * are, and each of `invalid` is 400 parameter_invalid naming limit. `list` asks with a query string.
 */
export async function expectLimitBounds(
  list: (query: string) => Promise<CallResult>,
  max: number,
  total: number,
  invalid: string[],
): Promise<void> {
  const one = await list("?limit=1");
  expect(one.status).toBe(200);
  expect(one.body.data).toHaveLength(1);
  expect(one.body.has_more).toBe(true);
  expect((await list(`?limit=${max}`)).body.data).toHaveLength(total);
  for (const limit of invalid) {
    expectApiError(await list(`?limit=${limit}`), 400, "parameter_invalid", "limit");
  }
}

export function epoch(date: Date): number {
  return Math.floor(date.getTime() / 1000);
}

/** A tenant for test/support/lost-nothing.ts: a reading tenant with one contact (`phone`). */
export async function lostNothingTenant(env: TestEnv, name: string, phone: string): Promise<FeedTenant> {
  const tenant = await createShop(env, name);
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
