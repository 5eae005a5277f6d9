import { type RawBuilder, sql } from "kysely";
import type { Db } from "../db/connect.ts";
import type { MessageFailure } from "../db/schema.ts";
import type { RedisClient } from "../redis/connect.ts";
import { providerIdStash } from "./stash.ts";

/**
 * Sends in doubt. Before calling the provider the attempt is recorded (send_started_at); after the
 * provider's answer, its message id. A worker killed in between leaves the attempt "in doubt": the
 * provider may have sent it. The send carries our message id as Graph's biz_opaque_callback_data,
 * which every status webhook of that send echoes; so before trying again we look in the provider-id
 * stash and for such a status (the echo lookup), and only after `sendInDoubtMs` without either do
 * we conclude that the first attempt never arrived.
 */

/** An in-doubt send whose outcome is not known yet. */
export class SendNotYetPossible extends Error {}

/** An in-doubt send looks again for its stashed or echoed id this often. */
const IN_DOUBT_POLL_MS = 1000;

type DoubtWindow = { config: { workers: { sendInDoubtMs: number } } };

/** An attempt started after this is in doubt: nothing claims it again until it lapses. */
export function doubtCutoff(deps: DoubtWindow, now: Date): Date {
  return new Date(now.getTime() - deps.config.workers.sendInDoubtMs);
}

/**
 * The echo lookup, the one place it is written: a status webhook that echoes our message id
 * (status_events.client_reference) from the message's own sender proves that the provider took that
 * send, under the provider id it names. An echo from another sender proves nothing (a webhook for
 * number B cannot speak for number A's messages); one stored before events carried a sender counts,
 * as it always did. One row per message: its earliest echo.
 *
 * `events`: where to look, status_events or a caller's selection of its rows (aliased `e`);
 * `where`: which of those events, and of their messages (`m`).
 */
export function echoLookup(where: RawBuilder<unknown>, events: RawBuilder<unknown> = sql`status_events`) {
  return sql<{ id: string; provider_message_id: string }>`
    SELECT DISTINCT ON (m.id) m.id, e.provider_message_id
    FROM ${events} e
    JOIN messages m ON m.id = e.client_reference
    WHERE (e.sender_id IS NULL OR e.sender_id = m.sender_id)
      AND ${where}
    ORDER BY m.id, e.id`;
}

/** Provider ids proven by a status webhook of the message's own sender that echoed its id. */
async function echoedProviderIds(db: Db, messageIds: string[]): Promise<Map<string, string>> {
  if (messageIds.length === 0) return new Map();
  const { rows } = await echoLookup(sql`e.client_reference = ANY(${messageIds}::text[])`).execute(db);
  return new Map(rows.map((r) => [r.id, r.provider_message_id]));
}

/** For in-doubt sends: the id the provider gave the earlier attempt, if the stash or a webhook knows it. */
export async function knownProviderIds(
  deps: { db: Db; redis: RedisClient; config: { redisPrefix: string } },
  messageIds: string[],
): Promise<Map<string, string>> {
  if (messageIds.length === 0) return new Map();
  const known = await providerIdStash(deps).getMany(messageIds);
  const rest = messageIds.filter((id) => !known.has(id));
  for (const [id, providerId] of await echoedProviderIds(deps.db, rest)) known.set(id, providerId);
  return known;
}

/** A message the claim left that is still to be sent, and when to look at it again. */
export interface Waiting {
  id: string;
  senderId: string;
  contactId: string;
  /** Epoch milliseconds. */
  dueAt: number;
  lastError: MessageFailure | null;
}

/**
 * Of messages the claim left, those still to send: a retry not due yet (`notDue`, due at its
 * send_not_before) and an attempt in doubt (`inDoubt`, looked at again within IN_DOUBT_POLL_MS, or
 * when its doubt lapses if that is sooner).
 */
export async function unclaimedWaiting(
  deps: DoubtWindow & { db: Db },
  ids: string[],
  now: Date,
): Promise<{ notDue: Waiting[]; inDoubt: Waiting[] }> {
  const cutoff = doubtCutoff(deps, now);
  const waiting = await deps.db
    .selectFrom("messages")
    .select(["id", "sender_id", "contact_id", "send_started_at", "send_not_before", "last_error"])
    .where("id", "in", ids)
    .where("status", "=", "accepted")
    .where("direction", "=", "outbound")
    .where("provider_message_id", "is", null)
    .where((eb) => eb.or([eb("send_not_before", ">", now), eb("send_started_at", ">", cutoff)]))
    .execute();
  const notDue: Waiting[] = [];
  const inDoubt: Waiting[] = [];
  for (const row of waiting) {
    const message = {
      id: row.id!,
      senderId: row.sender_id!,
      contactId: row.contact_id,
      lastError: row.last_error,
    };
    if (row.send_started_at && row.send_started_at > cutoff) {
      const lapses = row.send_started_at.getTime() + deps.config.workers.sendInDoubtMs;
      inDoubt.push({ ...message, dueAt: Math.min(lapses, now.getTime() + IN_DOUBT_POLL_MS) });
    } else if (row.send_not_before) {
      notDue.push({ ...message, dueAt: row.send_not_before.getTime() });
    }
  }
  return { notDue, inDoubt };
}
