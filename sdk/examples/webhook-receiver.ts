/**
 * Receives the events the service pushes to a webhook endpoint: verifies each delivery's signature,
 * drops repeats (by event id), answers 204 at once and handles the event after, in arrival order.
 * At start it first catches up with GET /events from its stored cursor, so that what happened while
 * it was away (an endpoint disabled after days of failures, a receiver moved to a new URL) is read too.
 *
 *   WEBHOOK_SECRET=whsec_... MESSAGING_CLIENT_ID=cid_... MESSAGING_CLIENT_SECRET=csec_... \
 *     bun sdk/examples/webhook-receiver.ts
 *
 * The endpoint, and its secret (shown once), with the SDK:
 *   const { id, secret } = await client.webhookEndpoints.create({ url: "https://hooks.example.com/webhooks" });
 * (`http` and loopback URLs, such as http://127.0.0.1:8080/webhooks, only in development.)
 *
 * Environment: PORT (8080; 0 picks a free one), WEBHOOK_SECRET, EVENTS_CURSOR_FILE
 * (events-cursor.txt), MESSAGING_BASE_URL / _CLIENT_ID / _CLIENT_SECRET (for the catch-up).
 */
import { readFile, rename, writeFile } from "node:fs/promises";
import { type WebhookEvent, WebhookVerificationError } from "../src/index.ts";
import { clientFromEnv } from "./client-from-env.ts";

const SECRET = process.env.WEBHOOK_SECRET ?? "";
const CURSOR_FILE = process.env.EVENTS_CURSOR_FILE ?? "events-cursor.txt";
/** The catch-up is over once the log has had nothing new for this long. */
const CATCH_UP_IDLE_MS = 2_000;
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
      const message = event.data;
      const who = message.contact.phone ?? message.contact.id;
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

// The catch-up: GET /events from the stored cursor until nothing new comes, the cursor stored after
// each page was handled. Without a stored cursor it starts at the oldest event kept (30 days).
const since = (await readFile(CURSOR_FILE, "utf8").catch(() => "")).trim() || undefined;
console.error(since ? `catching up from ${since}` : "catching up from the oldest event kept");
const catchUp = new AbortController();
stop.signal.addEventListener("abort", () => catchUp.abort());
let idle = setTimeout(() => catchUp.abort(), CATCH_UP_IDLE_MS);
try {
  for await (const event of client.events.consume({
    since,
    signal: catchUp.signal,
    onCursor: async (cursor) => {
      await writeFile(`${CURSOR_FILE}.tmp`, cursor);
      await rename(`${CURSOR_FILE}.tmp`, CURSOR_FILE);
    },
  })) {
    clearTimeout(idle);
    // Done before the page's cursor is stored (onCursor comes after the page's last event).
    await handle(event, "catch-up");
    idle = setTimeout(() => catchUp.abort(), CATCH_UP_IDLE_MS);
  }
} catch (error) {
  // A catch-up that fails (the API unreachable, wrong credentials) does not stop the pushes.
  console.error("the catch-up stopped:", error);
} finally {
  clearTimeout(idle);
}
console.error("caught up; waiting for deliveries");
