import { type RawBuilder, sql } from "kysely";
import type { ProviderErrorCode } from "../channel/failure-codes.ts";

/**
 * Opt-out (DESIGN §13): the one home of what opts a contact out and back in. A contact with
 * `opted_out_at` set is not messaged (the send is refused, or an accepted message fails at its claim)
 * until it is cleared. What sets or clears it:
 *
 * - a customer's text that is one of the keywords below (`optOutKeyword`, applied when inbound
 *   messages are finalized: src/inbound/finalize.ts, the latest message of a contact wins);
 * - a send that fails with the provider's "the user stopped marketing messages" (WhatsApp 131050,
 *   normalized to `OPTED_OUT_FAILURE` by src/channel/provider.ts), synchronously
 *   (src/outbound/record.ts) or in a failed status webhook (src/outbound/status.ts);
 * - POST /contacts/{id}/opt_out and /opt_in (src/contacts/routes.ts).
 *
 * Opting out keeps an earlier `opted_out_at`; opting in clears it.
 */

export type OptOutChange = "opt_out" | "opt_in";

const OPT_OUT_WORDS: ReadonlySet<string> = new Set([
  "STOP",
  "STOPALL",
  "UNSUBSCRIBE",
  "CANCEL",
  "END",
  "QUIT",
]);
const OPT_IN_WORDS: ReadonlySet<string> = new Set(["START", "UNSTOP"]);

/** Trailing punctuation and whitespace a keyword may carry ("Stop!", "STOP ."). */
const TRAILING = /[.,!?;:\s]+$/u;

/**
 * What a customer's text asks for: trimmed of whitespace, then of trailing punctuation (`.,!?;:`)
 * and whitespace, compared case-insensitively (ASCII letters only) with the keywords. Anything
 * else (a keyword inside a sentence, "stop please") is an ordinary message: undefined.
 */
export function optOutKeyword(text: string | null | undefined): OptOutChange | undefined {
  if (!text) return undefined;
  const word = text.trim().replace(TRAILING, "");
  // Longer than any keyword, or not plain letters: never a keyword (and no Unicode case folding
  // turns another letter into one: "ſtop" is not STOP).
  if (word.length > 11 || !/^[A-Za-z]+$/.test(word)) return undefined;
  const upper = word.toUpperCase();
  if (OPT_OUT_WORDS.has(upper)) return "opt_out";
  if (OPT_IN_WORDS.has(upper)) return "opt_in";
  return undefined;
}

/**
 * The `failure.code` of a send the provider refused because the customer opted out (131050): a
 * message failing with it opts its contact out. The same code fails a message accepted before its
 * contact opted out (the claim), which changes nothing more: the contact is already opted out.
 */
export const OPTED_OUT_FAILURE = "recipient_opted_out" satisfies ProviderErrorCode;

/**
 * The CTEs `opting_out, opted_out` of a statement that fails sends: the contacts `contactIds` names
 * (a SELECT of the contact ids of messages failed with OPTED_OUT_FAILURE) are opted out from `now`;
 * an earlier opt-out is kept. Locked in id order, the one order of every contact writer.
 */
export function optOutContactsCtes(contactIds: RawBuilder<unknown>, now: Date): RawBuilder<unknown> {
  return sql`opting_out AS (
      SELECT c.id FROM contacts c
      WHERE c.id IN (${contactIds}) AND c.opted_out_at IS NULL
      ORDER BY c.id
      FOR UPDATE
    ), opted_out AS (
      UPDATE contacts c SET opted_out_at = ${now}
      FROM opting_out o WHERE c.id = o.id AND c.opted_out_at IS NULL
    )`;
}
