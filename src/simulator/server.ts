import { loadConfigOrExit, reachable } from "../config.ts";
import { stopWithParent } from "../lib/stop-with-parent.ts";
import { createSimulator } from "./app.ts";

/**
 * The simulator process (`bun run simulator`): the WhatsApp Cloud API sandbox on SIMULATOR_PORT
 * (SIMULATOR_HOST: loopback unless told otherwise), posting webhooks to the api's
 * /webhooks/whatsapp unless SIMULATOR_WEBHOOK_URL says otherwise.
 */
const config = loadConfigOrExit();

// It signs the webhooks it posts with the real app secret: in production, whoever reached it could
// post a signed STOP (or any status) for any customer.
if (config.isProduction) {
  console.error(
    "the WhatsApp simulator does not run with NODE_ENV=production: set WHATSAPP_GRAPH_URL to the provider (https://graph.facebook.com)",
  );
  process.exit(1);
}

const webhookUrl = config.simulatorWebhookUrl;
const shuffleStatuses = config.simulatorShuffleStatuses;

const simulator = createSimulator({
  webhookUrl,
  appSecret: config.whatsappAppSecret,
  statusDelayMs: config.simulatorStatusDelayMs,
  shuffleStatuses,
  webhookRetrySeconds: config.simulatorWebhookRetrySeconds,
  mps: config.simulatorMps,
  keepSends: config.simulatorKeepSends,
  log: (line) => console.log(line),
});
const app = simulator.app.listen({ port: config.simulatorPort, hostname: config.simulatorHost });

console.log(
  `WhatsApp simulator listening on http://${reachable(config.simulatorHost)}:${app.server?.port}: webhooks to ${webhookUrl}, ` +
    `statuses every ${config.simulatorStatusDelayMs} ms${shuffleStatuses ? " in shuffled order" : ""}` +
    (config.simulatorMps > 0 ? `, at most ${config.simulatorMps} sends per second per number` : ""),
);

let stopping = false;
async function shutdown(signal: string) {
  if (stopping) return;
  stopping = true;
  console.log(`simulator stopping (${signal})`);
  simulator.stop();
  await app.stop(false);
  process.exit(0);
}
process.on("SIGTERM", () => void shutdown("SIGTERM"));
process.on("SIGINT", () => void shutdown("SIGINT"));
stopWithParent((reason) => void shutdown(reason));
