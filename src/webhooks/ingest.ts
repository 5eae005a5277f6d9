import type { Db } from "../db/connect.ts";
import type { Logger } from "../logger.ts";
import { jobIdFor, type Queues } from "../queues/index.ts";

/**
 * Stores what a provider webhook carries, durably and deduplicated by the provider's ids, BEFORE
 * the webhook is acknowledged; the work itself happens in the finalize and status workers.
 */

interface WebhookValue {
  metadata?: { phone_number_id?: string };
  contacts?: { wa_id?: string; profile?: { name?: string } }[];
  messages?: ({ id?: string; from?: string } & Record<string, unknown>)[];
  statuses?: {
    id?: string;
    status?: string;
    timestamp?: string;
    errors?: unknown[];
    biz_opaque_callback_data?: string;
  }[];
}

interface WebhookBody {
  object?: string;
  entry?: { changes?: { field?: string; value?: WebhookValue }[] }[];
}

export interface IngestResult {
  inbound: string[];
  statuses: string[];
  /** Status events carried (one message may have several: sent, delivered, ...). */
  statusEvents: number;
  unknownNumbers: string[];
}

const STATUS_VALUES = new Set(["sent", "delivered", "read", "failed"]);

export async function ingestWebhook(deps: { db: Db; logger: Logger }, body: unknown): Promise<IngestResult> {
  const result: IngestResult = { inbound: [], statuses: [], statusEvents: 0, unknownNumbers: [] };
  const payload = body as WebhookBody;
  if (payload?.object !== "whatsapp_business_account" || !Array.isArray(payload.entry)) return result;

  const values = payload.entry.flatMap((entry) =>
    (entry?.changes ?? [])
      .filter((c) => c?.field === "messages" && c.value)
      .map((c) => c.value as WebhookValue),
  );
  const numberIds = [
    ...new Set(values.map((v) => v.metadata?.phone_number_id).filter((id): id is string => !!id)),
  ];
  if (numberIds.length === 0) return result;

  const senders = await deps.db
    .selectFrom("senders")
    .select(["id", "tenant_id", "provider_phone_number_id"])
    .where("provider_phone_number_id", "in", numberIds)
    .execute();
  const senderByNumber = new Map(senders.map((s) => [s.provider_phone_number_id, s]));

  const inboundRows: {
    provider_message_id: string;
    tenant_id: string;
    sender_id: string;
    payload: string;
  }[] = [];
  const statusRows: {
    provider_message_id: string;
    status: string;
    provider_timestamp: Date;
    errors: string | null;
    client_reference: string | null;
    sender_id: string;
  }[] = [];

  for (const value of values) {
    const numberId = value.metadata?.phone_number_id ?? "";
    const sender = senderByNumber.get(numberId);
    if (!sender) {
      // Acknowledged, not stored: retrying would not make the number known.
      result.unknownNumbers.push(numberId);
      continue;
    }
    for (const message of value.messages ?? []) {
      if (typeof message?.id !== "string" || typeof message.from !== "string") continue;
      const contact =
        (value.contacts ?? []).find((c) => c?.wa_id === message.from) ?? value.contacts?.[0] ?? null;
      inboundRows.push({
        provider_message_id: message.id,
        tenant_id: sender.tenant_id,
        sender_id: sender.id,
        payload: JSON.stringify({ message, contact }),
      });
    }
    for (const status of value.statuses ?? []) {
      if (typeof status?.id !== "string" || !STATUS_VALUES.has(String(status.status))) continue;
      const seconds = Number(status.timestamp);
      statusRows.push({
        provider_message_id: status.id,
        status: String(status.status),
        provider_timestamp: Number.isFinite(seconds) && seconds > 0 ? new Date(seconds * 1000) : new Date(),
        errors: Array.isArray(status.errors) ? JSON.stringify(status.errors) : null,
        client_reference:
          typeof status.biz_opaque_callback_data === "string"
            ? status.biz_opaque_callback_data.slice(0, 512)
            : null,
        // A status may move only this sender's messages (src/outbound/status.ts).
        sender_id: sender.id,
      });
    }
  }

  if (inboundRows.length > 0 || statusRows.length > 0) {
    await deps.db.transaction().execute(async (trx) => {
      if (inboundRows.length > 0) {
        await trx
          .insertInto("inbound_events")
          .values(inboundRows)
          .onConflict((oc) => oc.column("provider_message_id").doNothing())
          .execute();
      }
      if (statusRows.length > 0) {
        await trx
          .insertInto("status_events")
          .values(statusRows)
          .onConflict((oc) => oc.columns(["provider_message_id", "status", "sender_id"]).doNothing())
          .execute();
      }
    });
  }
  result.inbound = inboundRows.map((r) => r.provider_message_id);
  result.statuses = [...new Set(statusRows.map((r) => r.provider_message_id))];
  result.statusEvents = statusRows.length;
  if (result.unknownNumbers.length > 0) {
    deps.logger.warn(
      { phone_number_ids: result.unknownNumbers },
      "webhook for unknown phone number id acknowledged",
    );
  }
  return result;
}

/** Nudges the workers after commit. A lost nudge is harmless: the sweeper finds the rows. */
export async function enqueueIngested(queues: Queues, result: IngestResult, logger: Logger): Promise<void> {
  try {
    await Promise.all([
      // One nudge per webhook: the finalize worker drains every unfinalized event in batches, not
      // just the one its job names. The id is the first message's, as the sweeper's nudges are.
      result.inbound[0] !== undefined &&
        queues.finalize.add(
          "finalize",
          { providerMessageId: result.inbound[0] },
          { jobId: jobIdFor("in", result.inbound[0]) },
        ),
      result.statuses.length > 0 &&
        queues.status.addBulk(
          result.statuses.map((id) => ({
            name: "status",
            data: { providerMessageId: id },
            opts: { jobId: jobIdFor("st", `${id}-${Date.now()}`) },
          })),
        ),
    ]);
  } catch (error) {
    logger.warn(
      { err: (error as Error).message },
      "enqueue after webhook failed; the sweeper will pick the rows up",
    );
  }
}
