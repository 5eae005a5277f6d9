import type { Static } from "elysia";
import { sql } from "kysely";
import type { Clock } from "../clock.ts";
import { type MessagingState, messagingState } from "../contacts/messaging-state.ts";
import { toE164 } from "../contacts/phone.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import type { AuthContext } from "../http/request-state.ts";
import { isId, newId } from "../ids.ts";
import type { Logger } from "../logger.ts";
import type { Queues } from "../queues/index.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import { resolveSender } from "../senders/resolve.ts";
import {
  claimIdempotencyKey,
  findIdempotencyRecord,
  type IdempotencyClaim,
  recordIdempotencyKey,
  requestFingerprint,
} from "./idempotency.ts";
import type { AcceptedMessage, StoredContent } from "./presenter.ts";
import type { SendMessageRequest } from "./schemas.ts";
import { bindTemplate, findTemplateForSend } from "./template-binding.ts";

export type SendMessageInput = Static<typeof SendMessageRequest>;

export interface AcceptDeps {
  db: Db;
  redis: RedisClient;
  keys: RedisKeys;
  queues: Queues;
  clock: Clock;
  logger: Logger;
}

export interface AcceptOutcome {
  message: AcceptedMessage;
  /** True when an Idempotency-Key replay returned an earlier message. */
  replayed: boolean;
}

/** WhatsApp's limit on a text message, in characters (code points, not UTF-16 units). */
export const TEXT_BODY_MAX = 4096;

/** A twin request with the same key committed first; the caller answers with its message. */
class IdempotencyRace extends Error {}

export const SEND_JOB_OPTIONS = {
  attempts: 10,
  backoff: { type: "exponential", delay: Number(process.env.SEND_RETRY_BASE_MS ?? 2000) },
} as const;

function windowClosed(state: MessagingState, message: string, param: string): ApiError {
  return new ApiError("messaging_window_closed", message, { param, extra: { messaging_state: state } });
}

/** Checks that need nothing but the request itself, before any lookup. */
function checkShape(input: SendMessageInput): void {
  if ((input.template === undefined) === (input.body === undefined)) {
    throw new ApiError(
      "parameter_conflict",
      input.template === undefined
        ? "Give either template (an approved template) or body (free text)."
        : "Give template or body, not both.",
      { param: input.template === undefined ? "template" : "body" },
    );
  }
  if (input.to !== undefined && input.contact !== undefined) {
    throw new ApiError("parameter_conflict", "Give to (a phone number) or contact (a ctc_ id), not both.", {
      param: "contact",
    });
  }
  if (input.to === undefined && input.contact === undefined) {
    throw new ApiError(
      "parameter_missing",
      "Give the recipient: to (E.164 phone number) or contact (a ctc_ id).",
      {
        param: "to",
      },
    );
  }
  if (input.body !== undefined && [...input.body].length > TEXT_BODY_MAX) {
    throw new ApiError("parameter_invalid", `body may be at most ${TEXT_BODY_MAX} characters.`, {
      param: "body",
    });
  }
}

interface Recipient {
  /** Undefined for a phone number we have never seen: the contact is created with the message. */
  contactId: string | undefined;
  phone: string;
  lastInboundAt: Date | null;
}

async function resolveRecipient(db: Db, tenantId: string, input: SendMessageInput): Promise<Recipient> {
  if (input.contact !== undefined) {
    const contact = isId(input.contact, "ctc")
      ? await db
          .selectFrom("contacts")
          .select(["id", "phone", "last_inbound_at"])
          .where("tenant_id", "=", tenantId)
          .where("id", "=", input.contact)
          .executeTakeFirst()
      : undefined;
    if (!contact)
      throw new ApiError("resource_missing", `No such contact: ${input.contact}.`, { param: "contact" });
    return { contactId: contact.id, phone: contact.phone, lastInboundAt: contact.last_inbound_at };
  }
  const phone = toE164(input.to ?? "");
  if (!phone) {
    throw new ApiError("parameter_invalid", "to must be a phone number in E.164 form, like +4915123456789.", {
      param: "to",
    });
  }
  const contact = await db
    .selectFrom("contacts")
    .select(["id", "last_inbound_at"])
    .where("tenant_id", "=", tenantId)
    .where("channel", "=", "whatsapp")
    .where("phone", "=", phone)
    .executeTakeFirst();
  return { contactId: contact?.id, phone, lastInboundAt: contact?.last_inbound_at ?? null };
}

async function replayOf(db: Db, tenantId: string, messageId: string): Promise<AcceptOutcome> {
  const row = await db
    .selectFrom("messages")
    .innerJoin("contacts", "contacts.id", "messages.contact_id")
    .select([
      "messages.id",
      "messages.sender_id",
      "messages.contact_id",
      "contacts.phone",
      "messages.content",
      "messages.created_at",
    ])
    .where("messages.tenant_id", "=", tenantId)
    .where("messages.id", "=", messageId)
    .executeTakeFirstOrThrow();
  return {
    replayed: true,
    message: {
      id: messageId,
      senderId: row.sender_id ?? "",
      contactId: row.contact_id,
      phone: row.phone,
      content: row.content as unknown as StoredContent,
      createdAt: row.created_at,
    },
  };
}

/**
 * POST /messages (SPEC §4): validated, accepted exactly once, and handed to the send worker. The
 * message, a new contact, the idempotency record, the conversation summary and the feed hand-off
 * commit together; the send job is a nudge after commit (the sweeper re-sends a lost one).
 */
export async function acceptOutboundMessage(
  deps: AcceptDeps,
  auth: AuthContext,
  input: SendMessageInput,
  idempotencyKey: string | undefined,
): Promise<AcceptOutcome> {
  checkShape(input);
  const now = deps.clock.now();
  const fingerprint = idempotencyKey === undefined ? undefined : requestFingerprint(input);
  let claim: IdempotencyClaim | undefined;
  if (idempotencyKey !== undefined && fingerprint) {
    claim = await claimIdempotencyKey(deps, auth, idempotencyKey, fingerprint, now);
    if (claim.kind === "replay") return replayOf(deps.db, auth.tenantId, claim.messageId);
  }

  try {
    const sender = await resolveSender(deps.db, auth.tenantId, input.sender);
    const recipient = await resolveRecipient(deps.db, auth.tenantId, input);
    const state = messagingState(recipient.lastInboundAt, now, sender?.active === true);
    if (!sender?.active) {
      throw windowClosed(
        state,
        sender ? `Sender ${sender.id} is not active.` : "This account has no active sender.",
        input.sender === undefined ? "body" : "sender",
      );
    }

    let content: StoredContent;
    let type: "text" | "template";
    let text: string;
    let media: { type: string; filename: string | null } | undefined;
    if (input.body !== undefined) {
      if (!state.within_window) {
        throw windowClosed(
          state,
          "Free text can only be sent within 24 hours of the customer's last message; send an approved template.",
          "body",
        );
      }
      content = { kind: "text", body: input.body };
      type = "text";
      text = input.body;
    } else {
      const request = input.template!;
      const template = await findTemplateForSend(deps.db, auth.tenantId, sender.id, request);
      const bound = await bindTemplate({ db: deps.db, now }, sender, template, request);
      content = {
        kind: "template",
        template_id: template.id,
        template_name: template.name,
        language: template.language,
        components: bound.components as Record<string, unknown>,
      };
      type = "template";
      text = bound.rendered;
      const header = bound.components.header;
      if (header && header.type !== "text") media = { type: header.type, filename: header.filename ?? null };
    }

    const messageId = newId("msg");
    let contactId: string;
    try {
      contactId = await deps.db.transaction().execute(async (trx) => {
        const contact =
          recipient.contactId ??
          (
            await trx
              .insertInto("contacts")
              .values({
                id: newId("ctc"),
                tenant_id: auth.tenantId,
                phone: recipient.phone,
                name: input.recipient_name ?? null,
              })
              .onConflict((oc) =>
                // A twin request created it a moment ago: use it (and give it a name if it has none).
                oc.columns(["tenant_id", "channel", "phone"]).doUpdateSet({
                  name: sql`COALESCE(contacts.name, excluded.name)`,
                }),
              )
              .returning("id")
              .executeTakeFirstOrThrow()
          ).id;
        const inserted = await trx
          .insertInto("messages")
          .values({
            id: messageId,
            tenant_id: auth.tenantId,
            contact_id: contact,
            sender_id: sender.id,
            direction: "outbound",
            type,
            preview: text,
            text,
            media_type: media?.type ?? null,
            media_filename: media?.filename ?? null,
            status: "accepted",
            application_id: auth.clientId,
            content: JSON.stringify(content),
            created_at: now,
          })
          .returning("seq")
          .executeTakeFirstOrThrow();
        if (idempotencyKey !== undefined && fingerprint) {
          const recorded = await recordIdempotencyKey(trx, {
            clientId: auth.clientId,
            tenantId: auth.tenantId,
            key: idempotencyKey,
            fingerprint,
            messageId,
            now,
          });
          if (!recorded) throw new IdempotencyRace();
        }
        await trx
          .insertInto("conversations")
          .values({
            contact_id: contact,
            tenant_id: auth.tenantId,
            last_message_seq: inserted.seq,
            last_message_at: now,
            last_outbound_at: now,
            unread: 0,
          })
          .onConflict((oc) =>
            oc.column("contact_id").doUpdateSet({
              last_message_seq: sql`CASE WHEN (excluded.last_message_at, excluded.last_message_seq) > (conversations.last_message_at, conversations.last_message_seq) THEN excluded.last_message_seq ELSE conversations.last_message_seq END`,
              last_message_at: sql`GREATEST(conversations.last_message_at, excluded.last_message_at)`,
              last_outbound_at: sql`GREATEST(conversations.last_outbound_at, excluded.last_outbound_at)`,
              // DESIGN §3: unread counts inbound messages newer than our last outbound one.
              unread: 0,
            }),
          )
          .execute();
        await trx
          .insertInto("feed_pending")
          .values({ message_id: messageId, tenant_id: auth.tenantId })
          .execute();
        return contact;
      });
    } catch (error) {
      if (!(error instanceof IdempotencyRace) || idempotencyKey === undefined || !fingerprint) throw error;
      const durable = await findIdempotencyRecord(deps.db, auth.clientId, idempotencyKey, now);
      if (!durable) throw error;
      if (durable.hash !== fingerprint.toString("hex")) {
        throw new ApiError(
          "idempotency_key_reused",
          "This Idempotency-Key was used with a different request body.",
          {
            param: "Idempotency-Key",
          },
        );
      }
      return replayOf(deps.db, auth.tenantId, durable.messageId);
    }

    if (claim?.kind === "new") await claim.complete(messageId);
    await deps.queues.send
      .add("send", { messageId }, { jobId: messageId, ...SEND_JOB_OPTIONS })
      .catch((error: Error) =>
        deps.logger.warn(
          { message_id: messageId, err: error.message },
          "send enqueue failed; the sweeper will send it",
        ),
      );
    return {
      replayed: false,
      message: {
        id: messageId,
        senderId: sender.id,
        contactId,
        phone: recipient.phone,
        content,
        createdAt: now,
      },
    };
  } catch (error) {
    if (claim?.kind === "new") await claim.release();
    throw error;
  }
}
