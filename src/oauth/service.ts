import { type ApplicationRecord, updateApplication } from "../applications/repository.ts";
import { authenticateClient, parseScopes } from "../applications/service.ts";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { OAuthError } from "../http/errors.ts";
import type { TokenService } from "../http/request-state.ts";

export interface TokenRequestInput {
  body: Record<string, unknown> | null | undefined;
  authorization: string | null;
}

export interface ClientCredentials {
  clientId: string | undefined;
  clientSecret: string | undefined;
}

/** Credentials from HTTP Basic (RFC 6749 §2.3.1) or the body; never both (RFC: one method only). */
export function readClientCredentials(input: TokenRequestInput): ClientCredentials {
  const body = input.body ?? {};
  for (const [key, value] of Object.entries(body)) {
    if (Array.isArray(value))
      throw new OAuthError("invalid_request", `The parameter ${key} was given more than once.`);
  }
  const bodyId = optionalString(body.client_id, "client_id");
  const bodySecret = optionalString(body.client_secret, "client_secret");
  const basic = /^Basic +([A-Za-z0-9+/=]+) *$/i.exec(input.authorization ?? "");
  if (input.authorization && !basic) {
    throw new OAuthError(
      "invalid_client",
      "Only HTTP Basic client authentication is accepted in the Authorization header.",
      {
        "www-authenticate": 'Basic realm="oauth"',
      },
    );
  }
  if (basic?.[1]) {
    if (bodyId !== undefined || bodySecret !== undefined) {
      throw new OAuthError(
        "invalid_request",
        "Send client credentials either as HTTP Basic or in the body, not both.",
      );
    }
    const decoded = Buffer.from(basic[1], "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0)
      throw new OAuthError("invalid_client", "Malformed HTTP Basic credentials.", {
        "www-authenticate": 'Basic realm="oauth"',
      });
    // RFC 6749 §2.3.1: both parts are form-urlencoded before Base64.
    return {
      clientId: safeDecode(decoded.slice(0, colon)),
      clientSecret: safeDecode(decoded.slice(colon + 1)),
    };
  }
  return { clientId: bodyId, clientSecret: bodySecret };
}

function optionalString(value: unknown, name: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw new OAuthError("invalid_request", `${name} must be a string.`);
  return value;
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value.replaceAll("+", " "));
  } catch {
    return value;
  }
}

export interface IssuedToken {
  access_token: string;
  token_type: "Bearer";
  expires_in: number;
  scope: string;
}

/**
 * A token request up to its client's authentication (SPEC §5, RFC 6749 §4.4): the application whose
 * credentials (readClientCredentials) it carries. Throws OAuthError; `invalid_client` is a failed client authentication.
 * The secret is checked by comparing SHA-256 digests (one indexed lookup, no slow hash), so checking
 * before counting costs little; the per-IP limit in front bounds it.
 */
export async function authenticateTokenRequest(
  db: Db,
  body: Record<string, unknown> | null | undefined,
  credentials: ClientCredentials,
  /** The service's clock: a rotated secret's overlap ends by it. */
  now: Date = new Date(),
): Promise<ApplicationRecord> {
  const grantType = optionalString(body?.grant_type, "grant_type");
  if (grantType === undefined)
    throw new OAuthError("invalid_request", "Missing required parameter: grant_type.");
  if (grantType !== "client_credentials") {
    throw new OAuthError("unsupported_grant_type", "Only grant_type=client_credentials is supported.");
  }
  optionalString(body?.scope, "scope");
  if (!credentials.clientId || !credentials.clientSecret) {
    throw new OAuthError(
      "invalid_client",
      "Client authentication is required: client_id and client_secret.",
      {
        "www-authenticate": 'Basic realm="oauth"',
      },
    );
  }
  const application = await authenticateClient(db, credentials.clientId, credentials.clientSecret, now);
  if (!application) {
    throw new OAuthError("invalid_client", "Unknown client, wrong secret, or revoked application.", {
      "www-authenticate": 'Basic realm="oauth"',
    });
  }
  return application;
}

/** The client_credentials grant for an authenticated application (SPEC §5, RFC 6749 §4.4). */
export async function issueAccessToken(
  deps: { db: Db; tokens: TokenService; clock: Clock },
  body: Record<string, unknown> | null | undefined,
  application: ApplicationRecord,
): Promise<IssuedToken> {
  const requestedScope = optionalString(body?.scope, "scope");
  let scopes = application.scopes;
  if (requestedScope !== undefined) {
    const requested = parseScopes(requestedScope);
    if (!requested?.every((s) => application.scopes.includes(s))) {
      throw new OAuthError(
        "invalid_scope",
        `The scope must be a subset of: ${application.scopes.join(" ")}.`,
      );
    }
    scopes = requested;
  }
  const { token, expiresIn } = await deps.tokens.issue({
    clientId: application.clientId,
    tenantId: application.tenantId,
    scopes,
    readLimit: application.readLimit,
    sendLimit: application.sendLimit,
  });
  await updateApplication(deps.db, application.clientId, { lastTokenAt: deps.clock.now() });
  return { access_token: token, token_type: "Bearer", expires_in: expiresIn, scope: scopes.join(" ") };
}
