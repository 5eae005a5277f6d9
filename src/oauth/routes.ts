import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import type { ApplicationRecord } from "../applications/repository.ts";
import { OAuthError } from "../http/errors.ts";
import {
  consumeRateLimit,
  DEFAULT_LIMITS,
  type RateLimitOutcome,
  rateLimitHeaders,
  retryAfterSeconds,
} from "../http/rate-limit.ts";
import { callerIp, requestState, throwBodyProblem } from "../http/request-state.ts";
import { routePolicy } from "../http/route-policy.ts";
import { tokenErrors } from "../http/schemas.ts";
import type { RateLimitKind } from "../metrics/index.ts";
import { TokenRequest, TokenResponse } from "./schemas.ts";
import { authenticateTokenRequest, issueAccessToken, readClientCredentials } from "./service.ts";
import { TOKEN_LIFETIME_SECONDS } from "./tokens.ts";

/**
 * Failed client authentications (unknown client_id, wrong secret, revoked, malformed credentials),
 * per IP. They are counted apart from the per-client_id limit, which counts verified requests only:
 * naming someone else's client_id with a wrong secret cannot use up that client's budget.
 */
export const TOKEN_AUTH_FAILURES = { perIp: 10, windowSeconds: 60 } as const;

export function oauthRoutes(deps: AppDeps) {
  const failureWindow = (key: string, mode?: "peek") =>
    deps.redis.attemptWindow(key, TOKEN_AUTH_FAILURES.perIp, TOKEN_AUTH_FAILURES.windowSeconds, mode);

  return new Elysia().use(routePolicy).post(
    "/oauth/token",
    async ({ body, request, set }) => {
      set.headers["cache-control"] = "no-store";
      set.headers.pragma = "no-cache";
      const input = {
        body: body as Record<string, unknown> | null,
        authorization: request.headers.get("authorization"),
      };
      const failuresKey = deps.keys.tokenAuthFailures(callerIp(request));
      // An address that kept failing is refused before anything is checked, its right guesses too:
      // no answer may tell it which guess was right.
      const before = await failureWindow(failuresKey, "peek");
      if (before[0] === 0) {
        Object.assign(set.headers, rateLimitHeaders(failureOutcome(before)));
        throw tooManyFailures(deps, before);
      }
      throwBodyProblem(request);

      let application: ApplicationRecord;
      try {
        const credentials = readClientCredentials(input);
        const state = requestState(request);
        if (state && credentials.clientId) state.tokenClientId = credentials.clientId.slice(0, 128);
        application = await authenticateTokenRequest(deps.db, input.body, credentials, deps.clock.now());
      } catch (error) {
        if (!(error instanceof OAuthError && error.code === "invalid_client")) throw error;
        const after = await failureWindow(failuresKey);
        Object.assign(set.headers, rateLimitHeaders(failureOutcome(after)));
        throw after[0] === 0 ? tooManyFailures(deps, after) : error;
      }

      // Verified: the client's own budget (DESIGN §3: per client_id).
      const outcome = await consumeRateLimit(
        deps.redis,
        deps.keys.clientRate(application.clientId),
        deps.limits.token,
      );
      Object.assign(set.headers, rateLimitHeaders(outcome));
      if (!outcome.allowed) {
        deps.metrics.rateLimited.inc({ kind: "token" satisfies RateLimitKind });
        throw new OAuthError(
          "rate_limit_exceeded",
          `Too many token requests: the limit is ${outcome.limit} per second.`,
          {
            "retry-after": retryAfterSeconds(outcome),
          },
        );
      }
      return issueAccessToken(deps, input.body, application);
    },
    {
      // Its per-IP limit before the body (the client_id is in it); errors in RFC 6749's shape.
      policy: { limit: "token-ip", body: "api", errors: "oauth" },
      body: TokenRequest,
      response: { 200: TokenResponse, ...tokenErrors() },
      detail: {
        operationId: "getAccessToken",
        summary: "Get an access token",
        description: `OAuth 2.0 client credentials (RFC 6749 §4.4). Send \`grant_type\`, \`client_id\` and \`client_secret\` as JSON or form fields, or the credentials as HTTP Basic (\`Authorization: Basic base64(client_id:client_secret)\`) and only \`grant_type\` in the body. Tokens live ${TOKEN_LIFETIME_SECONDS} s; several may be valid at once. Limited to ${DEFAULT_LIMITS.token} requests per second per client_id (requests whose credentials were verified), and per IP before the body is read; after ${TOKEN_AUTH_FAILURES.perIp} failed client authentications in ${TOKEN_AUTH_FAILURES.windowSeconds} s an IP gets 429 until the window ends.`,
        tags: ["Authentication"],
        // The client authenticates with its credentials (HTTP Basic or the body), not with a scheme of
        // the document: the oauth2 scheme is what this endpoint grants.
        security: [],
        requestBody: {
          content: { "application/json": {}, "application/x-www-form-urlencoded": {} },
        },
        responses: {
          200: {
            description: "A bearer access token.",
            headers: {
              "Cache-Control": { description: "`no-store`.", schema: { type: "string" } },
            },
          },
        },
      },
    },
  );
}

/** The failure window's reply as the RateLimit-* headers show it (SPEC §8: the bucket that applied). */
function failureOutcome([allowed, ttl, count]: [number, number, number]): RateLimitOutcome {
  const resetSeconds = Math.max(1, ttl);
  return {
    allowed: allowed === 1,
    limit: TOKEN_AUTH_FAILURES.perIp,
    remaining: Math.max(0, TOKEN_AUTH_FAILURES.perIp - count),
    resetMs: resetSeconds * 1000,
    resetEpoch: Math.floor(Date.now() / 1000) + resetSeconds,
  };
}

function tooManyFailures(deps: Pick<AppDeps, "metrics">, reply: [number, number, number]): OAuthError {
  deps.metrics.rateLimited.inc({ kind: "auth_failures" satisfies RateLimitKind });
  return new OAuthError(
    "rate_limit_exceeded",
    `Too many failed client authentications from this address: the limit is ${TOKEN_AUTH_FAILURES.perIp} per ${TOKEN_AUTH_FAILURES.windowSeconds} s.`,
    { "retry-after": retryAfterSeconds(failureOutcome(reply)) },
  );
}
