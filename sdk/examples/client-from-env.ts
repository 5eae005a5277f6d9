/**
 * The examples' client: the service's base URL and the application's credentials from the
 * environment (MESSAGING_BASE_URL, default http://localhost:3000/v2; MESSAGING_CLIENT_ID,
 * MESSAGING_CLIENT_SECRET, e.g. the seed's: `bun run cli seed`), asking for only the scope it needs.
 */
import { MessagingClient, type Scope } from "../src/index.ts";

/** Where the examples call the API (with the `/v2`). */
export const BASE_URL = process.env.MESSAGING_BASE_URL ?? "http://localhost:3000/v2";

/** The client; exits with a message when the credentials are not set (nothing to try them with). */
export function clientFromEnv(scope: Scope): MessagingClient {
  const clientId = process.env.MESSAGING_CLIENT_ID ?? "";
  const clientSecret = process.env.MESSAGING_CLIENT_SECRET ?? "";
  if (!clientId || !clientSecret) {
    console.error(
      "Set MESSAGING_CLIENT_ID and MESSAGING_CLIENT_SECRET to the application's credentials " +
        "(`bun run cli seed` prints the development ones), and MESSAGING_BASE_URL when the API is " +
        `not at ${BASE_URL}.`,
    );
    process.exit(1);
  }
  return new MessagingClient({ baseUrl: BASE_URL, clientId, clientSecret, scopes: [scope] });
}
