/**
 * Sends the `order_shipped` template to one customer.
 *
 *   bun run start && bun run cli seed            # the service, and the seed's client_id/secret
 *   MESSAGING_CLIENT_ID=cid_... MESSAGING_CLIENT_SECRET=csec_... \
 *     bun sdk/examples/send-order-notification.ts +4915123456789 A-1001
 *
 * The seed's one sender (phone_number_id 100000000000001 in the simulator) is picked automatically.
 */
import { ApiError } from "../src/index.ts";
import { clientFromEnv } from "./client-from-env.ts";

const [to = "+4915123456789", order = "A-1001"] = process.argv.slice(2);

const client = clientFromEnv("messaging:send");

try {
  // One key per order: running this again for the same order does not notify the customer twice.
  const message = await client.messages.send(
    { to, template: { name: "order_shipped", language: "en", variables: { body: ["Ana", order] } } },
    { idempotencyKey: `order-shipped-${order}` },
  );
  console.log(`${message.id} ${message.status} to ${message.to.phone}`);
} catch (error) {
  if (!(error instanceof ApiError)) throw error;
  // Branch on code; quote requestId to support.
  console.error(`${error.status} ${error.code}: ${error.message} (${error.requestId})`);
  if (error.code === "quota_exceeded")
    console.error(`the daily quota resets at ${error.resetsAt?.toISOString()}`);
  process.exitCode = 1;
}
