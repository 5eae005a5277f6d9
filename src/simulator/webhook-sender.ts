import { randomInt } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { SIGNATURE_HEADER, signPayload } from "../channel/signature.ts";
import {
  buildWebhook,
  type WebhookBody,
  type WireUser,
  webhookTimestamp,
} from "../channel/webhook-payloads.ts";
import { ControlError, describeFailure } from "./errors.ts";
import { FAST_STATUS_DELAY_MS, SANDBOX_REPLY_TEXT, type SandboxBehaviour } from "./sandbox.ts";
import type { SimulatorLog, SimulatorOptions, SimulatorState } from "./state.ts";
import { inboundWebhook, statusUpdate, webhookAccount } from "./webhook-bodies.ts";

/**
 * Posting webhooks to the service, signed: the status webhooks of each accepted send (scheduled, and
 * retried while the service does not take them), and the single posts of control calls.
 */

const WEBHOOK_TIMEOUT_MS = 10_000;
/**
 * Posts in flight at once. Bun's fetch keeps at most 64 idle connections; beyond that, every post
 * over the bound opens a connection and closes it again, and the gateway accepts a new connection
 * for about every status it is sent (a provider, too, delivers over a bounded set of connections).
 */
export const WEBHOOK_POSTS_IN_FLIGHT = 48;
/** The first wait before a status webhook is posted again; each wait doubles, up to the cap. */
const WEBHOOK_RETRY_FIRST_MS = 200;
const WEBHOOK_RETRY_CAP_MS = 60_000;
export const DEFAULT_WEBHOOK_RETRY_SECONDS = 3600;

/** The wait after the `attempt`th failed post (0-based): 0.2 s, 0.4 s, 0.8 s, ... 60 s, 60 s, ... */
export function webhookRetryDelayMs(attempt: number): number {
  return Math.min(WEBHOOK_RETRY_FIRST_MS * 2 ** Math.min(attempt, 20), WEBHOOK_RETRY_CAP_MS);
}

function shuffled<T>(items: T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = randomInt(0, i + 1);
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

/** At most `size` holders at once; the others wait their turn, first come first served. */
function createGate(size: number) {
  let held = 0;
  const waiting: Array<() => void> = [];
  return {
    async enter(): Promise<void> {
      if (held < size) {
        held++;
        return;
      }
      await new Promise<void>((resolve) => waiting.push(resolve));
    },
    /** Hands the place to the next waiter, if any. */
    leave(): void {
      const next = waiting.shift();
      if (next) next();
      else held--;
    },
  };
}

export function createWebhookSender(options: SimulatorOptions, state: SimulatorState, log: SimulatorLog) {
  const postsInFlight = createGate(WEBHOOK_POSTS_IN_FLIGHT);

  /** The HTTP status the gateway answered, and the phone number ids it said it does not know. */
  async function postWebhook(
    body: WebhookBody,
    signal?: AbortSignal,
  ): Promise<{ status: number; unknownNumbers: string[] }> {
    await postsInFlight.enter();
    try {
      return await postWebhookNow(body, signal);
    } finally {
      postsInFlight.leave();
    }
  }

  async function postWebhookNow(
    body: WebhookBody,
    signal?: AbortSignal,
  ): Promise<{ status: number; unknownNumbers: string[] }> {
    const raw = JSON.stringify(body);
    const timeout = AbortSignal.timeout(WEBHOOK_TIMEOUT_MS);
    const target = typeof options.webhookUrl === "function" ? options.webhookUrl() : options.webhookUrl;
    const response = await fetch(target, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "facebookexternalua",
        [SIGNATURE_HEADER]: signPayload(raw, options.appSecret),
      },
      body: raw,
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    // The gateway takes a webhook for a number it does not know with a 200 (as it must, or the
    // provider would retry it for days) and names the number in its answer.
    const answer: unknown = await response.json().catch(() => null);
    const unknown = (answer as { unknown_phone_number_ids?: unknown } | null)?.unknown_phone_number_ids;
    return {
      status: response.status,
      unknownNumbers: Array.isArray(unknown) ? unknown.filter((n) => typeof n === "string") : [],
    };
  }

  /**
   * A provider keeps retrying a webhook the receiver did not take (a 5xx, a refused connection
   * while the api restarts), backing off, and gives up only after `webhookRetrySeconds`.
   */
  async function postWebhookWithRetries(body: WebhookBody, what: string, signal: AbortSignal): Promise<void> {
    const giveUpAt = Date.now() + (options.webhookRetrySeconds ?? DEFAULT_WEBHOOK_RETRY_SECONDS) * 1000;
    for (let attempt = 0; ; attempt++) {
      let outcome: string;
      try {
        const { status, unknownNumbers } = await postWebhook(body, signal);
        if (status >= 200 && status < 300) {
          if (unknownNumbers.length > 0) log(`webhook ${what}: the service does not know ${unknownNumbers}`);
          return;
        }
        outcome = `HTTP ${status}`;
      } catch (error) {
        if (signal.aborted) return;
        outcome = describeFailure(error);
      }
      const delay = webhookRetryDelayMs(attempt);
      if (Date.now() + delay > giveUpAt) {
        log(`webhook ${what} dropped after ${attempt + 1} attempts (${outcome})`);
        return;
      }
      log(`webhook ${what} failed (${outcome}); retrying in ${delay} ms`);
      await sleep(delay, undefined, { signal });
    }
  }

  /**
   * For control calls: one attempt, and the caller learns what the service answered. A number the
   * service does not know is the caller's mistake (a typo, the wrong seed): a 404 that says so.
   */
  async function postWebhookOnce(body: WebhookBody, phoneNumberId: string) {
    let answer: Awaited<ReturnType<typeof postWebhook>>;
    try {
      answer = await postWebhook(body);
    } catch (error) {
      return { webhook_status: null, webhook_error: describeFailure(error) };
    }
    if (answer.unknownNumbers.includes(phoneNumberId)) {
      throw new ControlError(
        `phone_number_id ${phoneNumberId} is not a sender of the service: it answered ${answer.status} and dropped the webhook. Use a connected sender's number (bun run cli sender list; the seed's is 100000000000001).`,
        404,
      );
    }
    return { webhook_status: answer.status };
  }

  function scheduleStatuses(
    phoneNumberId: string,
    wamid: string,
    recipient: WireUser,
    callbackData?: string,
    sandbox?: SandboxBehaviour,
  ) {
    const account = webhookAccount({ phoneNumberId });
    const delayMs = sandbox?.kind === "reads_fast" ? FAST_STATUS_DELAY_MS : options.statusDelayMs;
    const steps =
      sandbox?.kind === "stays_sent" ? (["sent"] as const) : (["sent", "delivered", "read"] as const);
    // Timestamps follow the true order even when the webhooks arrive shuffled.
    const start = Date.now();
    const updates = steps.map((status, step) =>
      statusUpdate(
        wamid,
        status,
        recipient,
        webhookTimestamp(new Date(start + (step + 1) * delayMs)),
        undefined,
        callbackData,
      ),
    );
    const signal = state.statusRuns.signal;
    void (async () => {
      for (const update of options.shuffleStatuses ? shuffled(updates) : updates) {
        await sleep(delayMs, undefined, { signal });
        await postWebhookWithRetries(
          buildWebhook(account, { statuses: [update] }),
          `${update.status} ${wamid}`,
          signal,
        );
      }
      if (sandbox?.kind === "replies") {
        await sleep(delayMs, undefined, { signal });
        const { webhook, message, author } = inboundWebhook(state, {
          phone_number_id: phoneNumberId,
          ...(recipient.phone === null ? {} : { from: recipient.phone }),
          user_id: recipient.userId,
          type: "text",
          text: SANDBOX_REPLY_TEXT,
          name: "Sandbox Customer",
        });
        await postWebhookWithRetries(webhook, `sandbox reply ${message.id} from ${author}`, signal);
      }
    })().catch((error) => {
      if (!signal.aborted) log(`status webhooks for ${wamid} stopped: ${describeFailure(error)}`);
    });
  }

  return { postWebhookOnce, scheduleStatuses };
}

export type WebhookSender = ReturnType<typeof createWebhookSender>;
