import { Elysia } from "elysia";
import type { AppDeps } from "../app.ts";
import { OAuthError } from "../http/errors.ts";
import { clientIpOf, throwBodyProblem } from "../http/pipeline.ts";
import { consumeRateLimit, DEFAULT_LIMITS, rateLimitHeaders, retryAfterSeconds } from "../http/rate-limit.ts";
import { requestState } from "../http/request-state.ts";
import { tokenErrors } from "../http/schemas.ts";
import type { RateLimitKind } from "../metrics/index.ts";
import { TokenRequest, TokenResponse } from "./schemas.ts";
import { type ClientCredentials, issueAccessToken, readClientCredentials } from "./service.ts";
import { TOKEN_LIFETIME_SECONDS } from "./tokens.ts";

export function oauthRoutes(deps: AppDeps) {
  return new Elysia().post(
    "/oauth/token",
    async ({ body, request, set, server }) => {
      set.headers["cache-control"] = "no-store";
      set.headers.pragma = "no-cache";
      const input = {
        body: body as Record<string, unknown> | null,
        authorization: request.headers.get("authorization"),
      };
      // Limit before anything else, keyed by the client_id when one can be read (DESIGN §3); a
      // malformed credential is reported only after that.
      let credentials: ClientCredentials | undefined;
      let credentialProblem: unknown;
      try {
        credentials = readClientCredentials(input);
      } catch (error) {
        credentialProblem = error;
      }
      const clientId = credentials?.clientId;
      const state = requestState(request);
      if (state && clientId) state.tokenClientId = clientId.slice(0, 128);
      const key = clientId
        ? deps.keys.clientRate(clientId.slice(0, 128))
        : deps.keys.ipRate(clientIpOf(request, server, deps.config.trustProxy), "token");
      const outcome = await consumeRateLimit(deps.redis, key, deps.limits.token);
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
      throwBodyProblem(request);
      if (!credentials) throw credentialProblem;
      return issueAccessToken(deps, input.body, credentials);
    },
    {
      body: TokenRequest,
      response: { 200: TokenResponse, ...tokenErrors() },
      detail: {
        operationId: "getAccessToken",
        summary: "Get an access token",
        description: `OAuth 2.0 client credentials (RFC 6749 §4.4). Send \`grant_type\`, \`client_id\` and \`client_secret\` as JSON or form fields, or the credentials as HTTP Basic (\`Authorization: Basic base64(client_id:client_secret)\`) and only \`grant_type\` in the body. Tokens live ${TOKEN_LIFETIME_SECONDS} s; several may be valid at once. Limited to ${DEFAULT_LIMITS.token} requests per second per client_id (per IP when no client_id can be read).`,
        tags: ["Authentication"],
        // HTTP Basic, or no Authorization header at all when the credentials are in the body.
        security: [{ clientBasic: [] }, {}],
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
