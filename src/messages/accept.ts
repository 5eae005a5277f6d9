import type { Clock } from "../clock.ts";
import { messagingState } from "../contacts/messaging-state.ts";
import type { Db } from "../db/connect.ts";
import type { ReadDatabase } from "../db/read-replica.ts";
import { ApiError } from "../http/errors.ts";
import type { AuthContext, IdempotencyReservation } from "../http/request-state.ts";
import { newId } from "../ids.ts";
import { ttlCache } from "../lib/ttl-cache.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics/index.ts";
import { nudgeSends, type Queues } from "../queues/index.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";
import { listTenantSenders, type SenderRow } from "../senders/repository.ts";
import { chooseSender } from "../senders/resolve.ts";
import { findApprovedTemplates } from "../templates/repository.ts";
import { type AcceptRow, createAcceptBatcher } from "./accept-batch.ts";
import { type SendContent, templateContent, textContent } from "./content.ts";
import {
  claimFromAdmission,
  claimIdempotencyKey,
  findIdempotencyRecord,
  type IdempotencyClaim,
  replayVerdict,
  requestFingerprint,
} from "./idempotency.ts";
import { type AcceptedMessage, acceptedMessageOf } from "./presenter.ts";
import { addressOrRefuse, type Recipient, resolveRecipient, unresolvedPhoneRecipient } from "./recipient.ts";
import { findMessage } from "./repository.ts";
import type { SendMessageInput } from "./schemas.ts";
import { checkShape, optedOut, phoneRequired, scheduledTime, windowClosed } from "./send-checks.ts";
import { bindTemplate, chooseTemplate } from "./template-binding.ts";

export interface AcceptDeps {
  config: { directoryCacheMs: number; workers: { sendRetryBaseMs: number } };
  db: Db;
  redis: RedisClient;
  keys: RedisKeys;
  queues: Queues;
  clock: Clock;
  logger: Logger;
  metrics: Pick<Metrics, "messagesAccepted">;
  readDb?: Pick<ReadDatabase, "noteWrites">;
}

export interface AcceptOutcome {
  message: AcceptedMessage;
  /** True when an Idempotency-Key replay returned an earlier message. */
  replayed: boolean;
}

async function replayOf(db: Db, tenantId: string, messageId: string): Promise<AcceptOutcome> {
  const row = await findMessage(db, tenantId, messageId);
  if (!row) throw replayedMessageGone(messageId);
  return { replayed: true, message: acceptedMessageOf(row) };
}

/**
 * The key's message was accepted and then removed by the tenant's message retention, inside the
 * key's 24 hours. A retention of 2 days or more (the CLI's floor) leaves no such case; one set
 * shorter by hand still may. Sending anew would break the key's promise (the customer would get
 * the message twice), so the key stays spent until it expires and the answer says so.
 */
function replayedMessageGone(messageId: string): ApiError {
  return new ApiError(
    "resource_missing",
    `This Idempotency-Key was already used: it created message ${messageId}, which is no longer kept (your account's message retention removed it). Nothing was sent again; to send a new message, use a new key.`,
    { param: "Idempotency-Key" },
  );
}

/**
 * POST /messages (SPEC §4): validated, accepted exactly once, and handed to the send worker. The
 * message, a new contact, the idempotency record, the conversation summary and the feed hand-off
 * commit together (grouped with concurrent sends, see accept-batch.ts); the send jobs are nudged
 * after commit (the sweeper re-sends a lost nudge).
 */
export function createMessageAcceptor(deps: AcceptDeps) {
  // A tenant's senders and approved templates change rarely and are read on every send. Entries are
  // reused only at the tenant's directory version the admission read (a change sets a new one), and
  // for at most DIRECTORY_CACHE_MS: a change is seen by the very next send of any api process.
  const senders = ttlCache(deps.config.directoryCacheMs, (tenantId) => listTenantSenders(deps.db, tenantId));
  const templates = ttlCache(deps.config.directoryCacheMs, (key) => {
    const [tenantId, senderId, name] = key.split("\u0000") as [string, string, string];
    return findApprovedTemplates(deps.db, tenantId, senderId, name);
  });
  const commit = createAcceptBatcher(deps, async (dueNow, committed) => {
    if (committed.length === 0) return;
    await Promise.all([
      // One job for the whole committed batch: the send worker claims and sends it as a batch.
      dueNow.length > 0
        ? nudgeSends(
            deps.queues.send,
            dueNow.map((row) => row.messageId),
            deps.config.workers.sendRetryBaseMs,
            { jobId: (ids) => `b-${ids[0]}` },
          )
        : undefined,
      // Once per batch, before any of its requests answers: the senders' next reads see their sends
      // even on a lagging replica (src/db/read-replica.ts).
      deps.readDb
        ?.noteWrites(committed.map((row) => ({ tenantId: row.tenantId, clientId: row.clientId })))
        .catch((error: Error) =>
          deps.logger.warn(
            { err: error.message },
            "could not note the batch's WAL position for read-your-writes",
          ),
        ),
    ]);
  });

  /**
   * The request, checked against the tenant's directory and the recipient's state: the sender, the
   * recipient (src/contacts/identity.ts decides who a person is), whether they may be messaged, and
   * the content (free text, or a template bound to its values).
   */
  async function validate(
    auth: AuthContext,
    input: SendMessageInput,
    now: Date,
    directoryVersion: string | undefined,
    sendAt: Date | undefined,
  ): Promise<ValidSend> {
    const sender = chooseSender(await senders.get(auth.tenantId, directoryVersion), input.sender);
    const recipient = await findRecipient(auth.tenantId, input, sender?.active === true);
    const state = messagingState(recipient.lastInboundAt, now, sender?.active === true, recipient.optedOut);
    const param = input.contact !== undefined ? "contact" : "to";
    // Opted out wins over a closed window (DESIGN §13). A send that looked up no contact is checked
    // by the statement that stores it (store.ts).
    if (recipient.optedOut) throw optedOut(param);
    if (!sender?.active) {
      throw windowClosed(
        state,
        sender ? `Sender ${sender.id} is not active.` : "This account has no active sender.",
        input.sender === undefined ? "body" : "sender",
      );
    }
    const content =
      input.body !== undefined
        ? textContent(input.body, recipient, state, sendAt)
        : await boundTemplate(auth.tenantId, sender, input.template!, directoryVersion, now);
    if (content.authentication && recipient.phone === null) throw phoneRequired(param);
    return { sender, recipient, ...content };
  }

  /**
   * Who the send goes to. A template to a phone number needs no lookup (the hot path): the commit
   * creates or finds the contact. Every other send looks its contact up: a free text needs the
   * window, a BSUID or a `contact` may name a person known otherwise (a merged id, a former BSUID).
   */
  async function findRecipient(tenantId: string, input: SendMessageInput, senderActive: boolean) {
    if (input.contact === undefined && input.body === undefined && senderActive) {
      const address = addressOrRefuse(input.to);
      if ("phone" in address) return unresolvedPhoneRecipient(address.phone);
    }
    return resolveRecipient(deps.db, tenantId, input);
  }

  /** An approved template of the sender (cached per directory version), bound to the request's values. */
  async function boundTemplate(
    tenantId: string,
    sender: SenderRow,
    request: NonNullable<SendMessageInput["template"]>,
    directoryVersion: string | undefined,
    now: Date,
  ): Promise<SendContent> {
    const template = chooseTemplate(
      await templates.get([tenantId, sender.id, request.name].join("\u0000"), directoryVersion),
      request,
    );
    return templateContent(template, await bindTemplate({ db: deps.db, now }, sender, template, request));
  }

  /** The key claimed in Redis: from this send's admission when it reserved it, else claimed here. */
  async function claimKey(auth: AuthContext, key: SendKey, reservation: IdempotencyReservation | undefined) {
    return reservation?.key === key.name
      ? claimFromAdmission(deps.redis, reservation, key.fingerprint)
      : await claimIdempotencyKey(deps, auth, key.name, key.fingerprint);
  }

  /**
   * The key's message as Postgres has it (Redis may have forgotten a finished key, or a twin with the
   * same key committed first): the replay, with the claim completed; undefined when there is none.
   */
  async function replayFromPostgres(auth: AuthContext, key: SendKey, claim: IdempotencyClaim, now: Date) {
    const durable = await findIdempotencyRecord(deps.db, auth.clientId, key.name, now);
    if (!durable) return undefined;
    replayVerdict(durable, key.fingerprint);
    const replay = await replayOf(deps.db, auth.tenantId, durable.messageId);
    if (claim.kind === "new") await claim.complete(replay.message.id);
    return replay;
  }

  /**
   * `directoryVersion`: the tenant's, from this send's admission (SendAdmission); undefined only for
   * a caller without one, which then accepts cached senders and templates up to DIRECTORY_CACHE_MS old.
   * `reservation`: the Idempotency-Key as that admission claimed it; without one, it is claimed here.
   * The steps: the request's shape, the key's claim (a replay ends here), the checks against the
   * directory and the recipient (a refusal of a key Postgres knows is a replay), the group commit.
   */
  return async function acceptOutboundMessage(
    auth: AuthContext,
    input: SendMessageInput,
    idempotencyKey: string | undefined,
    directoryVersion: string | undefined,
    reservation?: IdempotencyReservation,
  ): Promise<AcceptOutcome> {
    // A refusal before the claim below leaves a reservation to the admission, which refunds it.
    checkShape(input);
    const now = deps.clock.now();
    const sendAt = scheduledTime(input, now);
    const key =
      idempotencyKey === undefined
        ? undefined
        : { name: idempotencyKey, fingerprint: requestFingerprint(input) };
    const claim = key && (await claimKey(auth, key, reservation));
    if (claim?.kind === "replay") return replayOf(deps.db, auth.tenantId, claim.messageId);

    try {
      let valid: ValidSend;
      try {
        valid = await validate(auth, input, now, directoryVersion, sendAt);
      } catch (error) {
        const replay =
          key && claim && error instanceof ApiError
            ? await replayFromPostgres(auth, key, claim, now)
            : undefined;
        if (replay) return replay;
        throw error;
      }
      const messageId = newId("msg");
      const committed = await commit(acceptRow({ auth, input, valid, messageId, now, sendAt, key, claim }));
      if (committed.kind === "idempotency-taken") {
        // A twin with the same key committed first (Redis had lost the key): answer with its message.
        const replay = await replayFromPostgres(auth, key!, claim!, now);
        if (!replay) throw new Error("idempotency record vanished after a conflict");
        return replay;
      }
      if (committed.kind === "opted-out") throw optedOut("to");
      // The key's done marker was written with the batch (accept-batch.ts).
      deps.metrics.messagesAccepted.inc({ type: valid.type });
      return {
        replayed: false,
        message: acceptedMessage(input, valid, messageId, committed.contactId, now, sendAt),
      };
    } catch (error) {
      if (claim?.kind === "new") await claim.release();
      throw error;
    }
  };
}

/** An Idempotency-Key and the fingerprint of the request that carries it. */
interface SendKey {
  name: string;
  fingerprint: Buffer;
}

/** A send that passed its checks: its sender, its recipient and what it says. */
interface ValidSend extends SendContent {
  sender: SenderRow;
  recipient: Recipient;
}

/** The row the group commit stores for a checked send. */
function acceptRow(send: {
  auth: AuthContext;
  input: SendMessageInput;
  valid: ValidSend;
  messageId: string;
  now: Date;
  sendAt: Date | undefined;
  key: SendKey | undefined;
  claim: IdempotencyClaim | undefined;
}): AcceptRow {
  const { auth, input, valid, key, claim, now, sendAt } = send;
  return {
    messageId: send.messageId,
    tenantId: auth.tenantId,
    clientId: auth.clientId,
    senderId: valid.sender.id,
    contactId: valid.recipient.contactId,
    phone: valid.recipient.phone,
    userId: valid.recipient.userId,
    recipientName: input.recipient_name ?? null,
    type: valid.type,
    text: valid.text,
    mediaType: valid.media?.type ?? null,
    mediaFilename: valid.media?.filename ?? null,
    content: JSON.stringify(valid.content),
    clientReference: input.client_reference ?? null,
    sendAt: sendAt ?? null,
    validFor: input.valid_for ?? null,
    expiresAt:
      input.valid_for === undefined ? null : new Date((sendAt ?? now).getTime() + input.valid_for * 1000),
    createdAt: now,
    idempotency: key && {
      key: key.name,
      fingerprint: key.fingerprint,
      marker: claim?.kind === "new" ? claim.marker : undefined,
    },
  };
}

/** The Message a new send answers with. */
function acceptedMessage(
  input: SendMessageInput,
  valid: ValidSend,
  messageId: string,
  contactId: string,
  now: Date,
  sendAt: Date | undefined,
): AcceptedMessage {
  return {
    id: messageId,
    senderId: valid.sender.id,
    contactId,
    phone: valid.recipient.phone,
    content: valid.content,
    clientReference: input.client_reference ?? null,
    sendAt: sendAt ?? null,
    validFor: input.valid_for ?? null,
    createdAt: now,
  };
}

export type AcceptOutboundMessage = ReturnType<typeof createMessageAcceptor>;
