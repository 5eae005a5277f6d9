/**
 * Receives the events the service pushes to a webhook endpoint: verifies each delivery's signature,
 * drops repeats (by event id), answers 204 at once and handles the event after, in arrival order.
 * At start it first catches up with GET /events from its stored cursor, so that what happened while
 * it was away (an endpoint disabled after days of failures, a receiver moved to a new URL) is read too.
 * A catch-up that fails (the API unreachable, credentials refused) stops it with exit code 1.
 *
 *   MESSAGING_BASE_URL=http://localhost:3000/v2 MESSAGING_CLIENT_ID=cid_... MESSAGING_CLIENT_SECRET=csec_... \
 *     WEBHOOK_SECRET=whsec_... PORT=8080 bun sdk/examples/webhook-receiver.ts
 *
 * The endpoint, and its secret (shown once), with the SDK:
 *   const { id, secret } = await client.webhookEndpoints.create({ url: "https://hooks.example.com/webhooks" });
 * (`http` and loopback URLs, such as http://127.0.0.1:8080/webhooks, only in development.)
 *
 * Environment: PORT (8080; 0 picks a free one), WEBHOOK_SECRET, EVENTS_CURSOR_FILE
 * (events-cursor.txt), MESSAGING_BASE_URL (http://localhost:3000/v2) / _CLIENT_ID / _CLIENT_SECRET
 * (for the catch-up).
 */
import { readFile, rename, writeFile } from "node:fs/promises";
import { ApiError, type WebhookEvent, WebhookVerificationError } from "../src/index.ts";
import { BASE_URL, clientFromEnv } from "./client-from-env.ts";

const SECRET = process.env.WEBHOOK_SECRET ?? "";
const CURSOR_FILE = process.env.EVENTS_CURSOR_FILE ?? "events-cursor.txt";
/** How many handled event ids are remembered to drop repeats. */
const REMEMBERED_IDS = 10_000;

if (!SECRET.startsWith("whsec_")) {
  console.error("Set WEBHOOK_SECRET to the endpoint's whsec_ secret.");
  process.exit(1);
}

const client = clientFromEnv("messaging:read");

// De-duplication: every event comes at least once (a lost answer, a replay, the catch-up reading what
// was also pushed). In memory here; a real receiver keeps the ids with what it did (a unique key),
// for at least the 3 days an event may be retried.
const handled = new Set<string>();
function firstTime(id: string): boolean {
  if (handled.has(id)) return false;
  handled.add(id);
  if (handled.size > REMEMBERED_IDS) handled.delete(handled.values().next().value as string);
  return true;
}

// The work, one event after another in the order they came (the service posts a contact's next event
// only after this one was acknowledged, so the order of one contact is kept).
let work = Promise.resolve();
/** Queues the event's work unless it was handled before; resolves once it is done. */
function handle(event: WebhookEvent, via: "push" | "catch-up"): Promise<void> {
  if (!firstTime(event.id)) {
    console.log(`${event.id} repeated (${via}), ignored`);
    return work;
  }
  work = work
    .then(() => {
      if (event.type === "contact.merged") {
        // One person seen as two: their ids now answer the survivor (keep it, or map the merged ones).
        console.log(
          `${event.id} contact.merged ${event.data.merged.join(",")} -> ${event.data.survivor.id} (${via})`,
        );
        return;
      }
      const message = event.data;
      const who = message.contact.phone ?? message.contact.user_id ?? message.contact.id;
      const what = event.type === "message.failed" ? (message.failure?.code ?? "failed") : message.preview;
      console.log(`${event.id} ${event.type} ${message.id} ${who} ${what} (${via})`);
    })
    .catch((error: unknown) => console.error(`handling ${event.id} failed:`, error));
  return work;
}

const server = Bun.serve({
  port: Number(process.env.PORT ?? 8080),
  async fetch(request) {
    if (new URL(request.url).pathname !== "/webhooks") return new Response("not found", { status: 404 });
    if (request.method !== "POST") return new Response(null, { status: 405, headers: { allow: "POST" } });
    // The body exactly as it came: the signature covers these bytes, not a re-serialized object.
    const rawBody = await request.text();
    let event: WebhookEvent;
    try {
      event = await client.webhooks.verify(rawBody, request.headers, SECRET);
    } catch (error) {
      if (!(error instanceof WebhookVerificationError)) throw error;
      console.error(`refused a delivery: ${error.message}`);
      // Not acknowledged: the service retries it, a forger gets nothing. (Never 410 here: it disables
      // the endpoint.)
      return new Response("invalid signature", { status: 400 });
    }
    // Acknowledge at once (the service waits 10 s at most); the work goes on after the answer. A real
    // receiver stores the event durably (a table, a queue) before answering.
    void handle(event, "push");
    return new Response(null, { status: 204 });
  },
});
console.error(`listening on http://${server.hostname}:${server.port}/webhooks`);

const stop = new AbortController();
const shutDown = () => {
  stop.abort();
  server.stop();
};
process.once("SIGINT", shutDown);
process.once("SIGTERM", shutDown);

// The catch-up: GET /events from the stored cursor up to the head of the log (`stopAtHead`), the
// cursor stored after each page was handled. Without a stored cursor it starts at the oldest event
// kept (30 days). However slow the API is to answer (the SDK retries), "caught up" means read.
const since = (await readFile(CURSOR_FILE, "utf8").catch(() => "")).trim() || undefined;
console.error(since ? `catching up from ${since}` : "catching up from the oldest event kept");
let read = 0;
try {
  for await (const event of client.events.consume({
    since,
    stopAtHead: true,
    signal: stop.signal,
    onCursor: async (cursor) => {
      await writeFile(`${CURSOR_FILE}.tmp`, cursor);
      await rename(`${CURSOR_FILE}.tmp`, CURSOR_FILE);
    },
  })) {
    // Done before the page's cursor is stored (onCursor comes after the page's last event).
    await handle(event, "catch-up");
    read++;
  }
} catch (error) {
  // Without the catch-up, what happened while it was away would go unread: say why, and stop.
  console.error(`the catch-up failed: ${whyFailed(error)}`);
  server.stop(true);
  process.exit(1);
}
if (stop.signal.aborted) console.error("stopped before it caught up");
else console.error(`caught up (${read} events read); waiting for deliveries`);

/** A catch-up's failure, for the person who runs this: what went wrong, and which setting to check. */
function whyFailed(error: unknown): string {
  if (error instanceof ApiError && error.status === 401)
    return `${BASE_URL} refused the credentials (${error.code}: ${error.message}); check MESSAGING_CLIENT_ID and MESSAGING_CLIENT_SECRET`;
  if (error instanceof ApiError)
    return `${BASE_URL} answered ${error.status} ${error.code}: ${error.message}${error.requestId ? ` (${error.requestId})` : ""}`;
  const reason = error instanceof Error ? error.message : String(error);
  return `could not reach ${BASE_URL} (${reason}); check MESSAGING_BASE_URL`;
}
