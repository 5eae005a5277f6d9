import { Elysia, t } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { API_PREFIX } from "../http/paths.ts";
import { ALL_SCOPES } from "../http/request-state.ts";
import { POLICIES, routePolicy } from "../http/route-policy.ts";

/**
 * OAuth 2.0 Authorization Server Metadata (RFC 8414), so that a client library discovers the token
 * endpoint and how to authenticate from the issuer alone. The issuer is `{base_url}`, whose path is
 * the API prefix; RFC 8414 §3 puts the document at the well-known path followed by that path.
 */
export const METADATA_PATH = `/.well-known/oauth-authorization-server${API_PREFIX}`;

export const AuthorizationServerMetadata = t.Object({
  issuer: t.String(),
  token_endpoint: t.String(),
  grant_types_supported: t.Array(t.String()),
  token_endpoint_auth_methods_supported: t.Array(t.String()),
  scopes_supported: t.Array(t.String()),
  // Required by RFC 8414 §2; there is no authorization endpoint, so no response type.
  response_types_supported: t.Array(t.String()),
  service_documentation: t.String(),
});

export function oauthMetadataRoutes(deps: Pick<AppDeps, "config">) {
  const issuer = deps.config.publicBaseUrl;
  const metadata = {
    issuer,
    token_endpoint: `${issuer}/oauth/token`,
    grant_types_supported: ["client_credentials"],
    // POST /oauth/token takes HTTP Basic or the credentials in the body (src/oauth/service.ts).
    token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
    scopes_supported: [...ALL_SCOPES],
    response_types_supported: [],
    service_documentation: `${issuer}/reference`,
  };
  return new Elysia().use(routePolicy).get(
    METADATA_PATH,
    ({ set }) => {
      set.headers["cache-control"] = "public, max-age=3600";
      return metadata;
    },
    { policy: POLICIES.public, response: { 200: AuthorizationServerMetadata }, detail: { hide: true } },
  );
}
