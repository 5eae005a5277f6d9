import { t } from "elysia";
import { TOKEN_LIFETIME_SECONDS } from "./tokens.ts";

/**
 * Deliberately loose: RFC 6749 errors (invalid_request, unsupported_grant_type, ...) are decided by
 * the token service, not by a generic validation failure. The shape documents the fields.
 */
export const TokenRequest = t.Optional(
  t.Object(
    {
      grant_type: t.Optional(t.String({ description: "Required: `client_credentials`." })),
      client_id: t.Optional(t.String({ description: "`cid_` id; or send HTTP Basic credentials instead." })),
      client_secret: t.Optional(t.String({ description: "`csec_` secret; or send HTTP Basic credentials." })),
      scope: t.Optional(
        t.String({
          description: "Space-separated subset of the application's scopes; default: all of them.",
        }),
      ),
    },
    {
      additionalProperties: true,
      title: "TokenRequest",
      description:
        "`grant_type` is required; `client_id` and `client_secret` are required unless sent as HTTP Basic credentials (never both).",
      examples: [
        {
          grant_type: "client_credentials",
          client_id: "cid_6Yh8Uj0Ik2Ol4Pm6Qn8Rb0",
          client_secret: "csec_1Za3Xs5Cd7Vf9Bg1Nh3Mj5Kl7",
        },
      ],
    },
  ),
);

export const TokenResponse = t.Object(
  {
    access_token: t.String({ description: "Send as `Authorization: Bearer <access_token>`." }),
    token_type: t.Literal("Bearer"),
    expires_in: t.Integer({ description: `Seconds; always ${TOKEN_LIFETIME_SECONDS}.` }),
    scope: t.String({ description: "Space-separated scopes granted." }),
  },
  {
    title: "TokenResponse",
    examples: [
      {
        access_token:
          "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJjaWRfNlloOFVqMElrMk9sNFBtNlFuOFJiMCJ9.c2lnbmF0dXJl",
        token_type: "Bearer",
        expires_in: TOKEN_LIFETIME_SECONDS,
        scope: "messaging:send messaging:read webhooks:manage",
      },
    ],
  },
);
