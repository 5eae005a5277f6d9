/**
 * A client whose fetch is a stub answering GET /v2/events from a list of pages (no service): for
 * tests of how `events.consume` walks pages. The token endpoint always answers.
 */
import { MessagingClient } from "../src/index.ts";

export interface StubPage {
  data: string[];
  has_more: boolean;
  next_cursor: string;
}

export const jsonResponse = (body: unknown) =>
  new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });

/** `page(since)` gives the page asked for (`since` null on the first call). */
export function stubEventsClient(
  page: (since: string | null) => StubPage | Promise<StubPage>,
): MessagingClient {
  return new MessagingClient({
    baseUrl: "https://api.example.test/v2",
    clientId: "cid_test",
    clientSecret: "csec_test",
    fetch: async (input) => {
      const url = new URL(input);
      if (url.pathname === "/v2/oauth/token")
        return jsonResponse({ access_token: "at_test", token_type: "bearer", expires_in: 3600 });
      const answer = await page(url.searchParams.get("since"));
      return jsonResponse({
        object: "list",
        url: "/v2/events",
        has_more: answer.has_more,
        next_cursor: answer.next_cursor,
        data: answer.data.map((id) => ({ object: "event", id, type: "message.read", created: 1, data: {} })),
      });
    },
  });
}
