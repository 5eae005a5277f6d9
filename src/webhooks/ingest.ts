import { sql } from "kysely";
import { parseWebhook, type WebhookChange } from "../channel/webhook-events.ts";
import type { Clock } from "../clock.ts";
import { attachStatusRecipients, type StatusRecipientRow } from "../contacts/identity.ts";
import type { Db } from "../db/connect.ts";
import { createGroupCommit, type GroupCommit } from "../db/group-commit.ts";
import { ttlCache } from "../lib/ttl-cache.ts";
import type { Logger } from "../logger.ts";
import { type StatusRecipient, statusStatementHead } from "../outbound/status.ts";
import { nudgeDrain } from "../queues/drain-nudge.ts";
import type { Queues } from "../queues/index.ts";
import { findSenderByProviderPhoneNumberId } from "../senders/repository.ts";

/**
 * Stores what provider webhooks carry (as src/channel/webhook-events.ts reads them), durably and
 * deduplicated by the provider's ids, BEFORE they are acknowledged. Inbound messages are finalized
 * by the finalize worker; statuses of known messages are applied here, in the same statement, and
 * the rest wait for the status worker. Concurrent webhooks are committed together (group commit):
 * one statement, one multi-row write per table, and one coalesced nudge per worker queue for the
 * whole batch.
 */

export interface IngestResult {
  inbound: string[];
  statuses: string[];
  /** Status events carried (one message may have several: sent, delivered, ...). */
  statusEvents: number;
  unknownNumbers: string[];
  /** Some statuses of this body's batch wait in status_events for their message: a drain is due. */
  statusesWaiting: boolean;
}

interface InboundRow {
  provider_message_id: string;
  tenant_id: string;
  sender_id: string;
  payload: string;
}

interface StatusRow {
  provider_message_id: string;
  status: string;
  provider_timestamp: Date;
  errors: string | null;
  client_reference: string | null;
  sender_id: string;
  recipient: StatusRecipient;
}

type SenderRef = { id: string; tenant_id: string };

/** One webhook's rows, given the senders of the batch by phone_number_id. */
function rowsOf(changes: WebhookChange[], senderByNumber: Map<string, SenderRef>) {
  const result: IngestResult = {
    inbound: [],
    statuses: [],
    statusEvents: 0,
    unknownNumbers: [],
    statusesWaiting: false,
  };
  const inboundRows: InboundRow[] = [];
  const statusRows: StatusRow[] = [];
  for (const change of changes) {
    const sender = senderByNumber.get(change.phoneNumberId);
    if (!sender) {
      // Acknowledged, not stored: retrying would not make the number known.
      if (change.phoneNumberId) result.unknownNumbers.push(change.phoneNumberId);
      continue;
    }
    for (const event of change.received) {
      inboundRows.push({
        provider_message_id: event.providerMessageId,
        tenant_id: sender.tenant_id,
        sender_id: sender.id,
        payload: event.payload,
      });
    }
    for (const status of change.statuses) {
      statusRows.push({
        provider_message_id: status.providerMessageId,
        status: status.status,
        provider_timestamp: status.at,
        errors: status.errors,
        client_reference: status.clientReference,
        // A status may move only this sender's messages (src/outbound/status.ts).
        sender_id: sender.id,
        recipient: {
          phone: status.identity.phone,
          userId: status.identity.userId,
          parentUserId: status.identity.parentUserId,
        },
      });
    }
  }
  result.inbound = inboundRows.map((r) => r.provider_message_id);
  result.statuses = [...new Set(statusRows.map((r) => r.provider_message_id))];
  result.statusEvents = statusRows.length;
  return { result, inboundRows, statusRows };
}

const byKey =
  <T>(key: (row: T) => string) =>
  (a: T, b: T) => {
    const ka = key(a);
    const kb = key(b);
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  };

/** How long a phone_number_id's sender is remembered: a number names one sender for good. */
const SENDER_CACHE_MS = 10_000;

/** Thrown by the cache's load so that a number not found is not remembered. */
class UnknownNumber extends Error {}

/**
 * Senders by phone_number_id, remembered for a while (the project's ttlCache over the senders
 * repository's lookup): under load every webhook batch names the same few numbers, and the lookup
 * was a round trip of every batch. A number not found is not remembered (a failed load is
 * forgotten), so a sender created a moment ago is seen at once.
 */
export function createSenderLookup(db: Db) {
  const byNumber = ttlCache<SenderRef>(SENDER_CACHE_MS, async (numberId) => {
    const sender = await findSenderByProviderPhoneNumberId(db, numberId);
    if (!sender) throw new UnknownNumber(numberId);
    return { id: sender.id, tenant_id: sender.tenant_id };
  });
  return async (numberIds: string[]): Promise<Map<string, SenderRef>> => {
    const found = new Map<string, SenderRef>();
    await Promise.all(
      numberIds.map(async (numberId) => {
        const sender = await byNumber.get(numberId).catch((error: unknown) => {
          if (error instanceof UnknownNumber) return undefined;
          throw error;
        });
        if (sender) found.set(numberId, sender);
      }),
    );
    return found;
  };
}

type SenderLookup = ReturnType<typeof createSenderLookup>;

/**
 * Stores the events of many webhook bodies in ONE statement (atomic on its own, so one round trip:
 * no BEGIN and COMMIT): inbound messages in one insert, statuses applied to their messages or
 * stored to wait, all in one statement (unnest: one parameter per column, whatever the count).
 * Messages are locked in seq order and waiting rows go in key order, so concurrent batches (a
 * provider's retry among them) take their locks in one order. Answers one result per body, in order.
 */
export async function commitWebhooks(
  deps: { logger: Logger; db: Db; clock: Clock; senders: SenderLookup },
  bodies: unknown[],
): Promise<IngestResult[]> {
  const changes = bodies.map(parseWebhook);
  const numberIds = [
    ...new Set(
      changes
        .flat()
        .map((c) => c.phoneNumberId)
        .filter((id) => id !== ""),
    ),
  ];
  const empty = (): IngestResult => ({
    inbound: [],
    statuses: [],
    statusEvents: 0,
    unknownNumbers: [],
    statusesWaiting: false,
  });
  if (numberIds.length === 0) return bodies.map(empty);

  const senderByNumber = await deps.senders(numberIds);
  const perBody = changes.map((values) => rowsOf(values, senderByNumber));
  const inbound = perBody.flatMap((b) => b.inboundRows).sort(byKey((r) => r.provider_message_id));
  // In arrival order, the tie-break of equal timestamps; the statement writes waiting rows in key order.
  const statuses = perBody.flatMap((b) => b.statusRows);
  const insertInbound = sql`
    INSERT INTO inbound_events (provider_message_id, tenant_id, sender_id, payload)
    SELECT v.id, v.tenant_id, v.sender_id, v.payload::jsonb
    FROM unnest(${inbound.map((r) => r.provider_message_id)}::text[],
                ${inbound.map((r) => r.tenant_id)}::text[],
                ${inbound.map((r) => r.sender_id)}::text[],
                ${inbound.map((r) => r.payload)}::text[]) AS v(id, tenant_id, sender_id, payload)
    ON CONFLICT (provider_message_id) DO NOTHING`;
  // Statuses of messages known by their provider id are applied here, in this statement (the
  // status rule in SQL, src/outbound/status.ts); only the rest is stored, to wait in status_events
  // for the send's answer or an echo of our id (a status can overtake the send's response), or
  // behind statuses of their message that wait already.
  const statusHead = statusStatementHead(
    statuses.map((r, order) => ({
      providerMessageId: r.provider_message_id,
      status: r.status,
      at: r.provider_timestamp,
      errors: r.errors,
      clientReference: r.client_reference,
      senderId: r.sender_id,
      order,
      recipient: r.recipient,
    })),
    deps.clock.now(),
    { behindWaiting: true },
  );
  const storeWaiting = sql`
    waiting AS (
      INSERT INTO status_events
        (provider_message_id, status, provider_timestamp, errors, client_reference, sender_id,
         recipient_phone, recipient_user_id, recipient_parent_user_id)
      SELECT e.pid, e.status, e.at, e.errors, e.client_reference, e.sender_id,
             e.recipient_phone, e.recipient_user_id, e.recipient_parent_user_id
      FROM ev e
      WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.provider_message_id = e.pid)
      ORDER BY e.pid, e.status, e.sender_id
      ON CONFLICT (provider_message_id, status, sender_id) DO NOTHING
      RETURNING 1
    )`;
  let waiting = 0;
  if (statuses.length > 0) {
    const { rows } = await sql<{ waiting: number; unattached: StatusRecipientRow[] | null }>`
      WITH ${inbound.length > 0 ? sql`stored_inbound AS (${insertInbound}),` : sql``}
        ${statusHead}, ${storeWaiting}
      SELECT (SELECT count(*) FROM waiting)::int AS waiting,
             (SELECT json_agg(u) FROM unattached u) AS unattached`.execute(deps.db);
    waiting = rows[0]?.waiting ?? 0;
    // Recipients their message's contact does not carry yet (rare): attached by the identity rule
    // (DESIGN §14) in a transaction of its own, after the statement, whose locks on messages would
    // otherwise be held while it waits for the identity module's (a merge takes those first, then
    // the messages: a deadlock). Before the webhook is acknowledged: if this fails or the process
    // dies here, the provider delivers the statuses again, and they find the same recipients.
    await attachStatusRecipients(deps.db, rows[0]?.unattached ?? []);
  } else if (inbound.length > 0) {
    await insertInbound.execute(deps.db);
  }
  const results = perBody.map((b) => ({ ...b.result, statusesWaiting: waiting > 0 }));

  const unknownNumbers = [...new Set(results.flatMap((r) => r.unknownNumbers))];
  if (unknownNumbers.length > 0) {
    deps.logger.warn(
      { phone_number_ids: unknownNumbers },
      "webhook for unknown phone number id acknowledged",
    );
  }
  return results;
}

/**
 * Nudges the workers after a batch's commit: at most one finalize and one status nudge for the
 * whole batch, coalesced with any already waiting (src/queues/drain-nudge.ts). A lost nudge is
 * harmless: the sweeper finds the rows.
 */
async function enqueueIngested(queues: Queues, results: IngestResult[], logger: Logger): Promise<void> {
  const firstInbound = results.find((r) => r.inbound.length > 0)?.inbound[0];
  const anyStatusWaits = results.some((r) => r.statusesWaiting);
  try {
    await Promise.all([
      // The finalize worker drains every unfinalized event, then makes sure the one named is done.
      firstInbound !== undefined && nudgeDrain(queues.finalize, { providerMessageId: firstInbound }),
      anyStatusWaits && nudgeDrain(queues.status, { nudgedAt: Date.now() }),
    ]);
  } catch (error) {
    logger.warn(
      { err: (error as Error).message },
      "enqueue after webhook failed; the sweeper will pick the rows up",
    );
  }
}

/** The api's webhook store: concurrent webhook requests share a transaction and a nudge. */
export function createWebhookIngest(deps: {
  db: Db;
  clock: Clock;
  logger: Logger;
  queues: Queues;
}): GroupCommit<unknown, IngestResult> {
  const senders = createSenderLookup(deps.db);
  return createGroupCommit<unknown, IngestResult>({
    name: "webhooks",
    logger: deps.logger,
    // One batch commits while the next gathers: a provider waits seconds for its answer, not
    // milliseconds, so webhooks trade a commit's wait for batches three times as large (fewer
    // commits and WAL flushes per message than sends, which answer an integrator waiting).
    parallel: 1,
    commit: (bodies) => commitWebhooks({ ...deps, senders }, bodies),
    afterCommit: (_, results) => enqueueIngested(deps.queues, results, deps.logger),
  });
}
