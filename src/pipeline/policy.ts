import { bodyPolicy, declaredTooLarge, tooLargeError } from "../http/body.ts";
import { ApiError } from "../http/errors.ts";
import { consumeRateLimit, rateLimitError, rateLimitHeaders } from "../http/rate-limit.ts";
import { createRejectionTally } from "../http/rejection-tally.ts";
import { type RequestState, requestState } from "../http/request-state.ts";
import type { RouteLimit } from "../http/route-policy.ts";
import { admitSendRequest } from "../messages/admission.ts";
import type { RateLimitKind } from "../metrics/index.ts";
import type { PipelineDeps, ResponseSet } from "./pipeline-deps.ts";
import type { RouteIndex } from "./route-index.ts";

/**
 * A webhook caller whose requests keep failing the signature (or the body) check is refused before
 * its next body is read, for the rest of the minute. The provider's own signed traffic is never
 * counted: it is not limited here, however heavy.
 */
const WEBHOOK_REJECTIONS_PER_MINUTE = 20;

/**
 * The policy of the matched route (src/http/route-policy.ts) applied to a request: its rate limit,
 * spent before the body is read (the application's, after authenticating its bearer token, or the
 * caller's IP's), and its body cap against the declared length.
 */
export function policyGate(deps: PipelineDeps, index: RouteIndex) {
  const webhookRejections = createRejectionTally({ limit: WEBHOOK_REJECTIONS_PER_MINUTE, windowMs: 60_000 });

  /** One limit spent: the headers set, a refusal counted under `kind` and thrown as a 429. */
  const spend = async (set: ResponseSet, key: string, max: number, kind: RateLimitKind) => {
    const outcome = await consumeRateLimit(deps.redis, key, max);
    Object.assign(set.headers, rateLimitHeaders(outcome));
    if (!outcome.allowed) {
      deps.metrics.rateLimited.inc({ kind });
      throw rateLimitError(outcome);
    }
  };
  const limitIp = (set: ResponseSet, ip: string, kind: "token" | "panel" | "ops") =>
    spend(set, deps.keys.ipRate(ip, kind), deps.ipLimits[kind], kind);

  /** The bearer token, when one is given: recorded in the request state either way. */
  const authenticate = async (request: Request, state: RequestState) => {
    const header = request.headers.get("authorization");
    if (header === null) return undefined;
    state.tokenGiven = true;
    const bearer = /^Bearer +([^\s]+) *$/i.exec(header);
    const check = bearer?.[1]
      ? await deps.tokens.check(bearer[1])
      : ({ ok: false, problem: "malformed" } as const);
    if (!check.ok) {
      state.authProblem = check.problem;
      return undefined;
    }
    state.auth = check.auth;
    return check.auth;
  };

  /** The caller's limit: the application's (send or read), or its IP's without a valid token. */
  const spendCallerLimit = async (
    request: Request,
    set: ResponseSet,
    state: RequestState,
    limit: Extract<RouteLimit, "read" | "send" | "send-admission">,
  ) => {
    const auth = await authenticate(request, state);
    if (auth && limit === "send-admission")
      return admitSendRequest(deps.admitSend, auth, request, state, set);
    if (!auth)
      return spend(set, deps.keys.ipRate(state.clientIp(), "read"), deps.ipLimits.anonymous, "anonymous");
    const kind = limit === "read" ? "read" : "send";
    const max = kind === "send" ? auth.sendLimit : auth.readLimit;
    return spend(set, deps.keys.applicationRate(auth.tenantId, auth.clientId, kind), max, kind);
  };

  /**
   * Applies the policy of the route the router matched, once per request: from the body parser for
   * requests with a body, else from the transform (both run after routing, before the handler).
   * Limits come before anything is read: a refused request is never read, let alone parsed.
   */
  const applyPolicy = async (context: { request: Request; set: ResponseSet; route: string }) => {
    const { request, set } = context;
    const state = requestState(request);
    if (!state || state.policy) return state;
    const policy = index.policyOf(request.method, context.route);
    state.policy = policy;
    state.bodyPolicy = bodyPolicy(policy.body ?? "form");
    switch (policy.limit) {
      case "none":
        break;
      case "webhook-rejections":
        if (webhookRejections.exceeded(state.clientIp)) {
          throw new ApiError("rate_limit_exceeded", "Too many rejected webhook requests from this address.", {
            headers: { "retry-after": String(webhookRejections.retryAfterSeconds(state.clientIp())) },
          });
        }
        // This request's refusals count in the tally (noteRefused).
        state.refusals = webhookRejections;
        break;
      case "token-ip":
        await limitIp(set, state.clientIp(), "token");
        break;
      case "panel-ip":
        await limitIp(set, state.clientIp(), "panel");
        break;
      case "ops-ip":
        await limitIp(set, state.clientIp(), "ops");
        break;
      default:
        await spendCallerLimit(request, set, state, policy.limit);
    }
    // After the limit: a refused request spends its unit like any other (DESIGN §13), and is never read.
    if (declaredTooLarge(request, state.bodyPolicy)) throw tooLargeError(state.bodyPolicy);
    return state;
  };

  return { applyPolicy, spendCallerLimit };
}

export type PolicyGate = ReturnType<typeof policyGate>;
