import type { ProviderErrorCode } from "../channel/failure-codes.ts";

/**
 * Reserved test recipients: sends to these numbers drive one path of the gateway each, with no
 * control call first. +1 555 0001 xxx is in the 555-01xx-style fictional range: no real phone has it.
 * Each failing number answers the send with the Graph error that the gateway normalizes to the
 * named code (src/channel/provider.ts); docs/simulator.md lists them.
 */
export type SandboxBehaviour =
  | { kind: "fail"; graphCode: number; gatewayCode: ProviderErrorCode }
  /** Accepted, then only the `sent` status: never delivered. */
  | { kind: "stays_sent" }
  /** Accepted, then sent, delivered and read within a second, whatever the status delay. */
  | { kind: "reads_fast" }
  /** Accepted, the usual statuses, then the customer answers: the 24-hour window opens. */
  | { kind: "replies" };

const fail = (graphCode: number, gatewayCode: ProviderErrorCode): SandboxBehaviour => ({
  kind: "fail",
  graphCode,
  gatewayCode,
});

/** By wa_id (E.164 without the `+`), as the send's `to` reaches the simulator. */
export const SANDBOX_RECIPIENTS: Readonly<Record<string, SandboxBehaviour>> = {
  "15550001001": fail(131026, "recipient_invalid"),
  "15550001002": fail(131047, "reengagement_required"),
  "15550001003": fail(132000, "template_mismatch"),
  "15550001004": fail(132001, "template_not_found"),
  "15550001005": fail(131009, "parameter_invalid"),
  "15550001006": fail(190, "provider_auth_failed"),
  "15550001007": fail(135000, "provider_error"),
  "15550001008": fail(130429, "provider_rate_limited"),
  "15550001009": fail(131000, "provider_unavailable"),
  "15550001010": fail(131050, "recipient_opted_out"),
  "15550001100": { kind: "stays_sent" },
  "15550001101": { kind: "reads_fast" },
  "15550001102": { kind: "replies" },
};

/** The wait before each status of a `reads_fast` recipient: read 300 ms after the send. */
export const FAST_STATUS_DELAY_MS = 100;

/** What a `replies` recipient writes back. */
export const SANDBOX_REPLY_TEXT = "Thanks, got it! (an automatic reply from the sandbox)";

export function sandboxBehaviour(waId: string): SandboxBehaviour | undefined {
  return SANDBOX_RECIPIENTS[waId];
}
