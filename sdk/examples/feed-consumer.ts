/**
 * Follows the message feed (every message of the account, inbound and outbound) and prints it,
 * persisting its cursor to a file: stop it (Ctrl-C) and start it again, and it goes on where it
 * stopped, missing nothing.
 *
 *   MESSAGING_CLIENT_ID=cid_... MESSAGING_CLIENT_SECRET=csec_... bun sdk/examples/feed-consumer.ts
 *
 * A customer's reply, through the development simulator (the seed's sender):
 *   curl -s localhost:3001/_sim/inbound -H 'content-type: application/json' \
 *     -d '{"phone_number_id":"100000000000001","from":"+4915123456789","type":"text","text":"Thanks!"}'
 */
import { readFile, rename, writeFile } from "node:fs/promises";
import { clientFromEnv } from "./client-from-env.ts";

const CURSOR_FILE = process.env.FEED_CURSOR_FILE ?? "feed-cursor.txt";

const client = clientFromEnv("messaging:read");

const stop = new AbortController();
process.once("SIGINT", () => stop.abort());
process.once("SIGTERM", () => stop.abort());

const since = (await readFile(CURSOR_FILE, "utf8").catch(() => "")).trim() || undefined;
console.error(since ? `resuming from ${since}` : "reading the feed from its start");

const feed = client.feed.consume({
  since,
  signal: stop.signal,
  // Called once every message before the cursor was handled below: written atomically.
  onCursor: async (cursor) => {
    await writeFile(`${CURSOR_FILE}.tmp`, cursor);
    await rename(`${CURSOR_FILE}.tmp`, CURSOR_FILE);
  },
});

for await (const message of feed) {
  // Handle each message idempotently (by message.id): after a crash, the last page comes again.
  const who = message.contact.phone ?? message.contact.id;
  const arrow = message.direction === "inbound" ? "<-" : "->";
  console.log(`${message.id} ${arrow} ${who} [${message.type}] ${message.text ?? message.preview}`);
}
console.error("stopped");
