/**
 * Invites customers to an event, schedules a reminder for each an hour before it, and cancels the
 * reminders of those who declined: `messages.sendBatch`, `send_at` and `messages.cancel`.
 *
 *   bun run start && bun run cli seed            # the service, and the seed's client_id/secret
 *   export MESSAGING_CLIENT_ID=cid_... MESSAGING_CLIENT_SECRET=csec_...
 *   bun sdk/examples/send-campaign.ts open-day 2026-06-01T17:00:00Z +4915123456789 +4915123456780
 *   # later, when the second customer has declined:
 *   bun sdk/examples/send-campaign.ts open-day 2026-06-01T17:00:00Z +4915123456789 +4915123456780 \
 *     --decline +4915123456780
 *
 * Safe to run again with the same arguments: every message has a key made of the campaign, its kind
 * and the recipient, so a repeat is answered with the messages already made (200) and sends nothing.
 * Any number of recipients: sendBatch makes one call per 1,000. Uses the `appointment_reminder`
 * template of the simulator's catalogue.
 */
import { ApiError, type BatchResult, BatchSendError, type SendBatchItem } from "../src/index.ts";
import { clientFromEnv } from "./client-from-env.ts";

const args = process.argv.slice(2);
const declineAt = args.indexOf("--decline");
const [campaign, eventTime, ...recipients] = declineAt === -1 ? args : args.slice(0, declineAt);
const declined = new Set(declineAt === -1 ? [] : args.slice(declineAt + 1));
const event = new Date(eventTime ?? "");
if (!campaign || Number.isNaN(event.getTime()) || recipients.length === 0) {
  console.error(
    "usage: send-campaign.ts <campaign> <event time, ISO 8601> <phone>... [--decline <phone>...]",
  );
  process.exit(2);
}

const client = clientFromEnv("messaging:send");

const day = event.toISOString().slice(0, 10);
const time = `${event.toISOString().slice(11, 16)} UTC`;
const message = (to: string, kind: "invite" | "reminder"): SendBatchItem => ({
  to,
  template: {
    name: "appointment_reminder",
    language: "en",
    header: campaign,
    variables: { body: [day, time] },
    buttons: { "0": campaign },
  },
  // Yours, echoed on the message everywhere (history, feed, events): join our records to yours.
  client_reference: `${campaign}:${kind}`,
  idempotency_key: `${campaign}:${kind}:${to}`,
});

/** One line per row: the item's recipient, its status, and its message or the reason it was refused. */
function report(kind: string, results: BatchResult[]) {
  for (const row of results) {
    const to = recipients[row.index];
    if (row.message) console.log(`${kind} ${to} ${row.status} ${row.message.id} ${row.message.status}`);
    else console.log(`${kind} ${to} ${row.status} ${row.error?.code}: ${row.error?.message}`);
  }
}

try {
  // Now: the invitations, every item answered on its own (a recipient who opted out gets a 409 row,
  // the others go out).
  report("invite", await client.messages.sendBatch(recipients.map((to) => message(to, "invite"))));

  // An hour before the event: the reminders, stored `scheduled` until then. The daily quota is spent
  // today, when they are accepted, and a cancel does not give it back.
  const sendAt = Math.floor(event.getTime() / 1000) - 3600;
  if (sendAt < Date.now() / 1000 + 60) {
    console.log("reminders: the event is less than an hour away, none scheduled");
  } else {
    const reminders = await client.messages.sendBatch(
      recipients.map((to) => ({ ...message(to, "reminder"), send_at: sendAt })),
    );
    report("reminder", reminders);
    // Those who declined get no reminder. A cancel answered 200 is never sent, whatever the timing;
    // ApiError message_not_cancelable (409) means it already went out.
    for (const row of reminders) {
      const to = recipients[row.index]!;
      if (!declined.has(to) || !row.message) continue;
      try {
        const canceled = await client.messages.cancel(row.message.id);
        console.log(`canceled ${to} ${canceled.id} ${canceled.status}`);
      } catch (error) {
        if (!(error instanceof ApiError && error.code === "message_not_cancelable")) throw error;
        console.log(`not canceled ${to} ${row.message.id}: ${error.message}`);
      }
    }
  }
} catch (error) {
  // BatchSendError: a call failed after its retries; its message says what was answered and what to
  // send again (this script, run again, does just that). ApiError: branch on code, quote requestId.
  if (error instanceof BatchSendError) console.error(error.message);
  else if (error instanceof ApiError)
    console.error(`${error.status} ${error.code}: ${error.message} (${error.requestId})`);
  else throw error;
  process.exitCode = 1;
}
