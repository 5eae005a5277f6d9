import { t } from "elysia";
import { toE164 } from "../contacts/phone.ts";
import { isDependencyDown, serviceUnavailable } from "../http/dependency-faults.ts";
import { ApiError, internalError, loggableError } from "../http/errors.ts";
import type { AuthContext, IdempotencyReservation } from "../http/request-state.ts";
import { withExclusivePairs } from "../http/schemas.ts";
import { bodyValidationProblem, PATTERN_MEANS_KEY } from "../http/validation.ts";
import type { Logger } from "../logger.ts";
import type { AcceptOutboundMessage, AcceptOutcome } from "./accept.ts";
import {
  claimIdempotencyKeys,
  type IdempotencyDeps,
  KEY_FORMAT,
  releaseIdempotencyReservation,
} from "./idempotency.ts";
import { PRINTABLE_ASCII, type SendMessageInput, SendMessageRequest } from "./schemas.ts";

/**
 * POST /messages/batch (DESIGN §13): up to 1,000 sends in one call, each validated and answered on
 * its own. Items go through the one acceptor of sends (accept.ts), all at once, so they share its
 * group commit: 1,000 items are a few multi-row statements and a few send jobs, not 1,000 of each.
 * The call's rate unit is spent by its route's policy; the daily quota is reserved for the items in
 * one Redis call and what items do not use is given back in one more.
 */

/** Units of the daily quota reserved at once (POST /messages/batch). */
export interface QuotaReservation {
  granted: number;
  directoryVersion: string;
  /** Why units were not granted, for the items left without one. */
  exceeded: ApiError;
  /** Gives back `units` of the granted ones (items that created no message). */
  refund(units: number): Promise<void>;
}

/** Reserves up to `wanted` units of the tenant's daily quota (src/messages/admission.ts builds it). */
export type ReserveQuota = (auth: AuthContext, wanted: number) => Promise<QuotaReservation>;

export const BATCH_MAX_ITEMS = 1000;

export const IdempotencyKeyProperty = t.String({
  minLength: 1,
  maxLength: 255,
  pattern: KEY_FORMAT.source,
  [PATTERN_MEANS_KEY]: PRINTABLE_ASCII,
  description:
    "1-255 printable ASCII characters, in your application's namespace of Idempotency-Keys (shared with the header of single sends), kept 24 hours: the same key with the same item replays the original message (200); with another item, `idempotency_key_reused`.",
});

/** One item: a SendMessageRequest and its own optional idempotency key. */
export const SendBatchItem = t.Object(
  { ...SendMessageRequest.properties, idempotency_key: t.Optional(IdempotencyKeyProperty) },
  {
    additionalProperties: false,
    title: "SendBatchItem",
    description: "A SendMessageRequest, with an optional `idempotency_key` of its own.",
  },
);

/** What the route validates as a whole: the list; each item is validated on its own (its own row). */
export const SendBatchRequest = t.Object(
  {
    messages: t.Array(t.Unknown(), {
      minItems: 1,
      maxItems: BATCH_MAX_ITEMS,
      description: `1 to ${BATCH_MAX_ITEMS} SendBatchItems.`,
    }),
  },
  { additionalProperties: false, title: "SendBatchRequest" },
);

/** What the OpenAPI document and the SDK show: each item with its exclusive pairs. */
export const SendBatchRequestDocumented = t.Object(
  {
    messages: t.Array(
      withExclusivePairs(SendBatchItem, [
        ["to", "contact"],
        ["template", "body"],
      ]),
      {
        minItems: 1,
        maxItems: BATCH_MAX_ITEMS,
        description: `1 to ${BATCH_MAX_ITEMS} messages, answered in this order.`,
      },
    ),
  },
  { additionalProperties: false, title: "SendBatchRequest" },
);

export type BatchItemResult =
  | { index: number; status: 200 | 201; outcome: AcceptOutcome }
  | { index: number; status: number; error: ApiError };

function itemError(index: number, error: ApiError): BatchItemResult {
  return { index, status: error.status, error };
}

interface ValidItem {
  index: number;
  input: SendMessageInput;
  key: string | undefined;
}

/** The item as a send, or why it is not one (params relative to the item). */
function validateItem(index: number, item: unknown): ValidItem | BatchItemResult {
  if (item === null || typeof item !== "object" || Array.isArray(item)) {
    return itemError(
      index,
      new ApiError("parameter_invalid", "Each item of messages must be a JSON object."),
    );
  }
  const problem = bodyValidationProblem(SendBatchItem, item);
  if (problem) return itemError(index, problem);
  const { idempotency_key: key, ...input } = item as SendMessageInput & { idempotency_key?: string };
  return { index, input, key };
}

/** The recipient as the item names it (a number in its E.164 form). */
function recipientOf(input: SendMessageInput): string | undefined {
  if (input.contact !== undefined) return `c:${input.contact}`;
  if (input.to !== undefined) return `t:${toE164(input.to) ?? input.to}`;
  return undefined;
}

/** Items in chains: those sharing a recipient or an idempotency key in one, in item order. */
function chainsOf(items: ValidItem[]): ValidItem[][] {
  const chainOf = new Map<string, number>();
  const parent: number[] = items.map((_, i) => i);
  const root = (i: number): number => {
    while (parent[i] !== i) {
      parent[i] = parent[parent[i]!]!;
      i = parent[i]!;
    }
    return i;
  };
  items.forEach((item, i) => {
    for (const name of [recipientOf(item.input), item.key === undefined ? undefined : `k:${item.key}`]) {
      if (name === undefined) continue;
      const seen = chainOf.get(name);
      if (seen === undefined) chainOf.set(name, i);
      else parent[root(i)] = root(seen);
    }
  });
  const chains = new Map<number, ValidItem[]>();
  items.forEach((item, i) => {
    const r = root(i);
    const chain = chains.get(r);
    if (chain) chain.push(item);
    else chains.set(r, [item]);
  });
  return [...chains.values()];
}

/**
 * What an item that failed on our side answers in its row, as the error renderer would answer it
 * alone (src/pipeline/error-render.ts): Postgres or Redis away is 503, anything else a 500, logged.
 */
function failureOf(error: unknown, logger: Logger, requestId: string, index?: number): ApiError {
  if (error instanceof ApiError) return error;
  if (isDependencyDown(error)) return serviceUnavailable();
  logger.error(
    { request_id: requestId, item: index, error: loggableError(error) },
    "unhandled error in a batch item",
  );
  return internalError();
}

/** Errors about the idempotency key name the item's field, not the single send's header. */
function relativeToItem(error: ApiError): ApiError {
  if (error.param !== "Idempotency-Key") return error;
  return new ApiError(error.code, error.message.replace("Idempotency-Key", "idempotency_key"), {
    param: "idempotency_key",
    headers: error.headers,
    extra: error.extra,
  });
}

export interface BatchAcceptorDeps extends IdempotencyDeps {
  accept: AcceptOutboundMessage;
  reserveQuota: ReserveQuota;
  logger: Logger;
}

export function createBatchAcceptor(deps: BatchAcceptorDeps) {
  const { accept, reserveQuota } = deps;

  /**
   * One item through the one acceptor; whatever it fails with becomes its row, never the call's:
   * its neighbours may already be stored (DESIGN §13), and their rows are the only place the client
   * learns their ids.
   */
  async function acceptItem(
    auth: AuthContext,
    item: ValidItem,
    version: string,
    reservation: IdempotencyReservation | undefined,
    requestId: string,
  ): Promise<BatchItemResult> {
    try {
      const outcome = await accept(auth, item.input, item.key, version, reservation);
      return { index: item.index, status: outcome.replayed ? 200 : 201, outcome };
    } catch (error) {
      // A key claimed for the item and not yet settled (a refusal before its claim was used).
      if (reservation) await releaseIdempotencyReservation(deps.redis, reservation);
      return itemError(item.index, relativeToItem(failureOf(error, deps.logger, requestId, item.index)));
    }
  }

  /**
   * Items sharing a recipient or a key run one after another, in item order: the messages to one
   * contact get their order (seq) from their commits, and a later item with an earlier one's key is
   * its retry (a replay, or `idempotency_key_reused`). All other items run side by side.
   */
  async function acceptGranted(
    auth: AuthContext,
    items: ValidItem[],
    version: string,
    keysSeen: Set<string>,
    requestId: string,
  ) {
    // Every key's first item claims it in one pipeline for the round; a later item with the same
    // key claims it on its own once the earlier one is done (its retry).
    const first = items.filter((item) => {
      if (item.key === undefined || keysSeen.has(item.key)) return false;
      keysSeen.add(item.key);
      return true;
    });
    const claimed = await claimIdempotencyKeys(
      deps,
      auth,
      first.map((item) => item.key!),
    );
    const reservations = new Map(first.map((item, i) => [item, claimed[i]!]));
    const results = await Promise.all(
      chainsOf(items).map(async (chain) => {
        const done: BatchItemResult[] = [];
        for (const item of chain)
          done.push(await acceptItem(auth, item, version, reservations.get(item), requestId));
        return done;
      }),
    );
    return results.flat();
  }

  /** `requestId`: the call's, for the log of an item that failed on our side. */
  return async function acceptBatch(
    auth: AuthContext,
    items: readonly unknown[],
    requestId = "",
  ): Promise<BatchItemResult[]> {
    const results: BatchItemResult[] = new Array(items.length);
    const keysSeen = new Set<string>();
    let pending: ValidItem[] = [];
    items.forEach((item, index) => {
      const valid = validateItem(index, item);
      if ("input" in valid) pending.push(valid);
      else results[index] = valid;
    });
    let stored = 0;

    /**
     * The next items in order that the quota grants: their rows, and the items left for the next
     * round. The quota is spent by stored items only, and the items past it are the last ones: units
     * of items that end without a new message are given back, and reserved again for the items after
     * them.
     */
    async function round(items: ValidItem[]): Promise<ValidItem[]> {
      const reservation = await reserveQuota(auth, items.length);
      const granted = items.slice(0, reservation.granted);
      const rest = items.slice(reservation.granted);
      if (granted.length === 0) {
        for (const item of rest) results[item.index] = itemError(item.index, reservation.exceeded);
        return [];
      }
      let created = 0;
      try {
        const rows = await acceptGranted(auth, granted, reservation.directoryVersion, keysSeen, requestId);
        for (const row of rows) {
          results[row.index] = row;
          if (row.status === 201) created++;
        }
      } finally {
        await reservation.refund(granted.length - created);
        stored += created;
      }
      return rest;
    }

    while (pending.length > 0) {
      try {
        pending = await round(pending);
      } catch (error) {
        // Each item answers in its own row (acceptItem); a round fails whole only before its items
        // run (Redis away for the quota or the keys' claim). With nothing stored yet the call
        // fails whole, and its retry is safe; after some items were stored, the rest get the
        // failure in their rows and the call answers 200 (DESIGN §13).
        if (stored === 0) throw error;
        const failure = failureOf(error, deps.logger, requestId);
        for (const item of pending) results[item.index] ??= itemError(item.index, failure);
        break;
      }
    }
    return results;
  };
}

export type AcceptBatch = ReturnType<typeof createBatchAcceptor>;
