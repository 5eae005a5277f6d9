import type { WireUser } from "../channel/webhook-payloads.ts";

/** The simulator's options, and the state it keeps in memory between requests. */

export type SimulatorLog = (line: string) => void;

export interface SimulatorOptions {
  /** Where webhooks go: the service's /webhooks/whatsapp (a function when it is known only later). */
  webhookUrl: string | (() => string);
  /** Key of the X-Hub-Signature-256 HMAC. */
  appSecret: string;
  /** Wait before each of the sent, delivered and read webhooks of a send. */
  statusDelayMs: number;
  /** Post each send's statuses in random order, as a real provider sometimes does. */
  shuffleStatuses?: boolean;
  /**
   * How long a status webhook the receiver did not take (no 2xx) is retried, with exponential
   * backoff capped at a minute, before it is dropped. Default 3600 (Meta retries for 7 days).
   */
  webhookRetrySeconds?: number;
  /**
   * Sends per second accepted per phone number (a bucket of one second's worth); beyond it a send
   * is answered with 130429, as Graph does past a number's throughput. Unset or 0: unlimited.
   * POST /_sim/mps changes it at run time.
   */
  mps?: number;
  /**
   * The last this many sends are remembered (GET /_sim/sent, and where POST /_sim/status posts by
   * wamid); older ones are forgotten, so that a sandbox left running stays flat. Default 100,000.
   */
  keepSends?: number;
  log?: SimulatorLog;
}

export interface SentRecord {
  /** The wamid answered for the send. */
  id: string;
  phone_number_id: string;
  /** The send body exactly as received. */
  payload: unknown;
  /** The BSUID a send addressed by `recipient` (not `to`) went to. */
  recipient?: string;
  received_at: string;
}

/** A received file the simulator serves (GET /{version}/{media-id}, then its URL). */
export interface StoredMedia {
  bytes: Uint8Array<ArrayBuffer>;
  mimeType: string;
  sha256: string;
}

export interface SimUser {
  /** Digits only; null when the simulator knows the user by BSUID only. */
  phone: string | null;
  userId: string;
  username: string | null;
  /** The user withholds the phone: webhooks carry neither `from`, `wa_id` nor `recipient_id`. */
  hidePhone: boolean;
}

export interface SimUsers {
  byUserId: Map<string, SimUser>;
  /** Digits -> the user who has that phone now. */
  byPhone: Map<string, SimUser>;
}

function createSimUsers(): SimUsers {
  return { byUserId: new Map(), byPhone: new Map() };
}

export interface SimulatorState {
  sent: SentRecord[];
  /** Sends forgotten to keep memory flat (GET /_sim/sent says how many). */
  forgottenSends: number;
  /** Where each accepted send went, by wamid, for the status webhooks /_sim/status posts. */
  accepted: Map<string, { phoneNumberId: string; recipient: WireUser }>;
  /** The WhatsApp users met so far (users.ts). */
  users: SimUsers;
  /** Uploaded media id -> the phone number id it was uploaded for. */
  uploads: Map<string, string>;
  /** Inbound media by id, oldest first: at most MEDIA_KEPT files and MEDIA_KEPT_BYTES of given ones. */
  inboundMedia: Map<string, StoredMedia>;
  inboundMediaBytes: number;
  /** Graph error codes the next sends fail with (POST /_sim/fail-next). */
  pendingFailures: number[];
  /** Delays (ms) before answering the next sends (POST /_sim/slow-next). */
  pendingDelays: number[];
  // Aborting cancels every scheduled status webhook (reset, stop).
  statusRuns: AbortController;
  mps: number;
  /** Per phone number id: tokens left and when they were counted (the SIMULATOR_MPS bucket). */
  buckets: Map<string, { tokens: number; at: number }>;
}

export function createSimulatorState(options: SimulatorOptions): SimulatorState {
  return {
    sent: [],
    forgottenSends: 0,
    accepted: new Map(),
    users: createSimUsers(),
    uploads: new Map(),
    inboundMedia: new Map(),
    inboundMediaBytes: 0,
    pendingFailures: [],
    pendingDelays: [],
    statusRuns: new AbortController(),
    mps: options.mps ?? 0,
    buckets: new Map(),
  };
}

/** POST /_sim/reset: forgets everything and cancels every scheduled status webhook; keeps `mps`. */
export function resetSimulatorState(state: SimulatorState): void {
  state.sent.length = 0;
  state.forgottenSends = 0;
  state.accepted.clear();
  state.users = createSimUsers();
  state.uploads.clear();
  state.inboundMedia.clear();
  state.inboundMediaBytes = 0;
  state.pendingFailures.length = 0;
  state.pendingDelays.length = 0;
  state.buckets.clear();
  state.statusRuns.abort();
  state.statusRuns = new AbortController();
}
