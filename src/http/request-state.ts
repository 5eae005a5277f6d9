import type { BodyPolicy } from "./body.ts";
import { ApiError } from "./errors.ts";
import type { RejectionTally } from "./rejection-tally.ts";
import type { RoutePolicy } from "./route-policy.ts";

/**
 * What an access token may do, each scope with what it allows (the OpenAPI document says it from
 * here). `webhooks:manage` is apart from `messaging:read`: a credential that only reads can neither
 * see an endpoint's secret nor repoint or silence the event stream (DESIGN §12).
 */
export const SCOPE_MEANINGS = {
  "messaging:send": "Send messages and upload media.",
  "messaging:read":
    "Read senders, templates, contacts, conversations, history, the feed, events and webhook endpoints.",
  "webhooks:manage":
    "Create, change, delete, replay webhook endpoints and rotate their signing secrets (a secret is shown only then).",
} as const;
export type Scope = keyof typeof SCOPE_MEANINGS;
/** Every scope; an application created without a choice of scopes gets them all. */
export const ALL_SCOPES: readonly Scope[] = Object.keys(SCOPE_MEANINGS) as Scope[];

/** Who is calling, from a verified access token. The tenant comes from here only, never from input. */
export interface AuthContext {
  clientId: string;
  tenantId: string;
  scopes: readonly Scope[];
  readLimit: number;
  sendLimit: number;
}

export type TokenCheck =
  | { ok: true; auth: AuthContext }
  | { ok: false; problem: "malformed" | "invalid" | "expired" };

/** Issues and checks access tokens (src/oauth/tokens.ts implements it). */
export interface TokenService {
  issue(input: AuthContext): Promise<{ token: string; expiresIn: number }>;
  check(token: string): Promise<TokenCheck>;
}

/**
 * An Idempotency-Key as the send admission took it, in the same Redis call as the limits
 * (src/messages/idempotency.ts): claimed for this request, or found taken by another.
 */
export interface IdempotencyReservation {
  /** The header's value. */
  key: string;
  redisKey: string;
  /** Names this request in its in-flight marker, so that only it releases the key. */
  token: string;
  /** Present when the key was taken already: the marker found (null if it vanished meanwhile). */
  taken?: string | null;
  /** Completed or released: nothing left to give back. */
  settled?: boolean;
}

/**
 * A send admitted by src/messages/admission.ts (the rate limit passed, a unit of the daily quota and
 * the Idempotency-Key, if any, reserved in one Redis call), settled once: kept when the send created a
 * message, refunded otherwise.
 */
export interface AdmittedSend {
  /**
   * The tenant's directory version, read in the same Redis call: the acceptor reuses its cached
   * senders and templates only while this is the version they were loaded at.
   */
  directoryVersion: string;
  /** The Idempotency-Key as the admission claimed it (or found it taken). */
  idempotency?: IdempotencyReservation;
  /** The send created a message: its quota unit stays spent. */
  keep(): void;
  /** Gives back what was reserved (the quota unit, a claimed key not completed), unless kept. Once. */
  refund(): Promise<void>;
}

/** What the pipeline learns about one request; read by hooks and handlers. */
export interface RequestState {
  requestId: string;
  startedAt: number;
  auth?: AuthContext;
  /** Why authentication failed, when a token was given but not accepted. */
  authProblem?: "malformed" | "invalid" | "expired";
  tokenGiven: boolean;
  /** The client_id a token request named (the access log's `application` before any token exists). */
  tokenClientId?: string;
  /** Final HTTP status, recorded where the response is made (for the access log). */
  status?: number;
  /** The body's exact bytes, kept by the parser for signature checks (webhooks). */
  rawBody?: Uint8Array;
  /** POST /messages: its admission, refunded if the request fails before the send route settles it. */
  admittedSend?: AdmittedSend;
  /** A body that could not be read (bad JSON, content type, size); raised after authorization. */
  bodyProblem?: ApiError;
  /**
   * The caller's address (see clientIpOf), for per-IP limits: worked out on first use, once (most
   * requests carry a token and never need it; asking the socket costs).
   */
  clientIp: () => string;
  /** The policy the matched route declared, once the pipeline applied it (src/http/route-policy.ts). */
  policy?: RoutePolicy;
  /** The size cap and reading mode of this request's body (src/http/body.ts), from the route's policy. */
  bodyPolicy?: BodyPolicy;
  /** The body was parsed from JSON or a form by the pipeline (so its route schema is checked there). */
  parsedBody?: boolean;
  /**
   * The tally a refusal of this request counts in, when its route's policy turns away callers that
   * keep being refused (webhooks; see noteRefused).
   */
  refusals?: RejectionTally;
}

const states = new WeakMap<Request, RequestState>();

export function setRequestState(request: Request, state: RequestState): void {
  states.set(request, state);
}

export function requestState(request: Request): RequestState | undefined {
  return states.get(request);
}

/**
 * A refusal (a 4xx other than 429) counted against the caller, where its route's policy counts them:
 * called where the answer is made, before it leaves, so the caller's next request already sees it.
 */
export function noteRefused(request: Request, status: unknown): void {
  if (typeof status !== "number" || status < 400 || status >= 500 || status === 429) return;
  const state = states.get(request);
  state?.refusals?.record(state.clientIp());
}

/** Raises a body problem the pipeline's parser recorded (it waits until the caller is authorized). */
export function throwBodyProblem(request: Request): void {
  const problem = states.get(request)?.bodyProblem;
  if (problem) throw problem;
}

/** The caller's address, as the pipeline worked it out once for the request (see clientIpOf). */
export function callerIp(request: Request): string {
  return states.get(request)?.clientIp() ?? "local";
}

/** 401 or 403 exactly as SPEC §5 and RFC 6750; returns the caller when it may proceed. */
export function authorize(request: Request, needed: Scope): AuthContext {
  const state = requestState(request);
  const auth = state?.auth;
  if (!auth) {
    const given = state?.tokenGiven ?? false;
    const message = !given
      ? "No access token. Send `Authorization: Bearer <token>` (get one from POST /oauth/token)."
      : state?.authProblem === "expired"
        ? "The access token has expired. Get a new one from POST /oauth/token."
        : "The access token is invalid.";
    const challenge = given
      ? `Bearer realm="messaging", error="invalid_token", error_description="${message.replaceAll('"', "'")}"`
      : `Bearer realm="messaging"`;
    throw new ApiError("unauthorized", message, { headers: { "www-authenticate": challenge } });
  }
  if (!auth.scopes.includes(needed)) {
    throw new ApiError("insufficient_scope", `This endpoint needs the scope ${needed}.`, {
      headers: {
        "www-authenticate": `Bearer realm="messaging", error="insufficient_scope", scope="${needed}"`,
      },
    });
  }
  return auth;
}
