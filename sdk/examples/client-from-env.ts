/**
 * The examples' client: the service's base URL and the application's credentials from the
 * environment (MESSAGING_BASE_URL, default http://localhost:3000/v2; MESSAGING_CLIENT_ID,
 * MESSAGING_CLIENT_SECRET, e.g. the seed's: `bun run cli seed`), asking for only the scope it needs.
 */
import { MessagingClient, type Scope } from "../src/index.ts";

export function clientFromEnv(scope: Scope): MessagingClient {
  return new MessagingClient({
    baseUrl: process.env.MESSAGING_BASE_URL ?? "http://localhost:3000/v2",
    clientId: process.env.MESSAGING_CLIENT_ID ?? "",
    clientSecret: process.env.MESSAGING_CLIENT_SECRET ?? "",
    scopes: [scope],
  });
}
