import { JSON_BODY_LIMIT } from "../http/body.ts";
import { DEFAULT_LIMITS } from "../http/rate-limit.ts";
import { METADATA_PATH } from "../oauth/metadata.ts";
import { TOKEN_LIFETIME_SECONDS } from "../oauth/tokens.ts";

/** The document's prose for people: its license, its tags, and the API's description (`info`). */

/** The API is the operator's own service, not open source (an SPDX LicenseRef, as OpenAPI 3.1 allows). */
export const LICENSE = { name: "Proprietary", identifier: "LicenseRef-Proprietary" };

export const TAGS = [
  {
    name: "Authentication",
    description: `OAuth 2.0 client credentials: exchange the application's \`client_id\` and \`client_secret\` for a bearer token that lives ${TOKEN_LIFETIME_SECONDS} seconds.`,
  },
  { name: "Messages", description: "Send messages, and read every message of your account in one feed." },
  {
    name: "Webhooks",
    description:
      "Push: every event of the log posted to your endpoints, signed per Standard Webhooks, in order per contact, resumable from any cursor.",
  },
  { name: "Media", description: "Upload files to send as the header of a template." },
  { name: "Senders", description: "Your connected sender numbers and their approved templates." },
  { name: "Contacts", description: "Contacts, their 24-hour messaging window, and their messages." },
  { name: "Conversations", description: "One entry per contact, ordered by its last message." },
  { name: "Documentation", description: "Pages for people." },
];

export const DESCRIPTION = `Send notifications to customers over WhatsApp and read their replies.

**Authentication.** Exchange your application's \`client_id\` and \`client_secret\` for an access token at
\`POST /oauth/token\` and send it as \`Authorization: Bearer <token>\`. Tokens live ${TOKEN_LIFETIME_SECONDS} seconds; each
endpoint needs the scope it names (\`messaging:send\`, \`messaging:read\` or \`webhooks:manage\`). OAuth client libraries can discover the
token endpoint from the issuer \`{base_url}\` (RFC 8414 metadata at \`${METADATA_PATH}\` of its host).

**Errors.** Every error has the envelope \`{"error": {"type", "code", "message", "param", "request_id", "doc_url"}}\`
(the token endpoint answers RFC 6749 errors instead). Branch on \`code\`; each response below lists the codes it can
carry. Besides those, any path answers 404 \`resource_missing\` when it does not exist, 405 \`method_not_allowed\`
(with \`Allow\`) for a method it does not take, and 413 \`request_too_large\` for a declared body over ${JSON_BODY_LIMIT / (1024 * 1024)} MB.

**Limits.** Per application: ${DEFAULT_LIMITS.read} read and ${DEFAULT_LIMITS.send} send requests per second (fixed one-second windows), plus a daily
send quota per channel; the token endpoint takes ${DEFAULT_LIMITS.token} per second per client. Every response carries \`Request-Id\`,
\`RateLimit-*\` (with \`RateLimit-Policy\`, e.g. \`${DEFAULT_LIMITS.send};w=1\`) and \`X-RateLimit-*\` (described once under
\`components/headers\` and listed on each operation's success and 429 answers; a 413, and a 503 whose limiter could not be
reached, carry none); a 429 carries \`Retry-After\`.
Each sender shows the quota's limit, today's use and when it resets (\`quota\` on \`GET /senders\`).

**Identifiers** are opaque, prefixed and case-sensitive (\`msg_\`, \`ctc_\`, \`snd_\`, \`tpl_\`, \`med_\`, \`req_\`, \`fd_\`).
Timestamps named \`created\` are Unix epoch seconds.`;
