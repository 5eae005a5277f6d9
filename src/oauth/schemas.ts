import { t } from "elysia";

/**
 * Deliberately loose: RFC 6749 errors (invalid_request, unsupported_grant_type, ...) are decided by
 * the token service, not by a generic validation failure. The shape documents the fields.
 */
export const TokenRequest = t.Optional(
  t.Object(
    {
      grant_type: t.Optional(t.String({ description: "Must be `client_credentials`." })),
      client_id: t.Optional(t.String({ description: "`cid_` id; or send HTTP Basic credentials instead." })),
      client_secret: t.Optional(t.String({ description: "`csec_` secret; or send HTTP Basic credentials." })),
      scope: t.Optional(t.String({ description: "Space-separated subset of the application's scopes." })),
    },
    { additionalProperties: true },
  ),
);

export const TokenResponse = t.Object({
  access_token: t.String(),
  token_type: t.Literal("Bearer"),
  expires_in: t.Integer({ description: "Seconds; always 3600." }),
  scope: t.String({ description: "Space-separated scopes granted." }),
});

export const OAuthErrorResponse = t.Object({
  error: t.String(),
  error_description: t.String(),
  request_id: t.String(),
});
