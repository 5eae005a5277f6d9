import { Elysia } from "elysia";
import { controlRoutes } from "./control-routes.ts";
import { unknownPathResponse } from "./errors.ts";
import { graphMediaRoutes, graphRoutes } from "./graph-routes.ts";
import { createSimulatorState, type SimulatorOptions } from "./state.ts";
import { createWebhookSender } from "./webhook-sender.ts";

export type { SentRecord, SimulatorOptions } from "./state.ts";
export { SIMULATOR_DISPLAY_PHONE_NUMBER, SIMULATOR_WABA_ID } from "./webhook-bodies.ts";
export {
  DEFAULT_WEBHOOK_RETRY_SECONDS,
  WEBHOOK_POSTS_IN_FLIGHT,
  webhookRetryDelayMs,
} from "./webhook-sender.ts";

/**
 * The WhatsApp Cloud API sandbox (DESIGN §4): Graph routes that validate sends like the real API and
 * answer with its shapes, signed status webhooks after each accepted send, and a control API under
 * /_sim for driving inbound messages, statuses and failures. State lives in memory.
 */
export function createSimulator(options: SimulatorOptions) {
  const log = options.log ?? (() => {});
  const state = createSimulatorState(options);
  const webhooks = createWebhookSender(options, state, log);

  const app = new Elysia({ normalize: false })
    .use(controlRoutes(state, webhooks, log))
    .use(graphRoutes(state, options, webhooks, log))
    .use(graphMediaRoutes(state, log))
    .onError(({ code, request }) => {
      if (code === "NOT_FOUND") return unknownPathResponse(request);
    });

  return {
    app,
    /** Cancels every scheduled status webhook; the caller stops the HTTP server. */
    stop() {
      state.statusRuns.abort();
    },
  };
}

export type Simulator = ReturnType<typeof createSimulator>;
