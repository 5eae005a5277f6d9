/**
 * Issue 42 item 6: GET /v2/events?types=… looks at a bounded part of the log a call, so a page may be
 * empty with `has_more` true. The consumer asks again at once instead of waiting as at the head.
 */
import { expect, test } from "bun:test";
import { MessagingClient } from "../src/index.ts";

const json = (body: unknown) =>
  new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });

test("events.consume asks again at once after an empty page with has_more", async () => {
  const pages = [
    { data: [], has_more: true, next_cursor: "evc_a" },
    { data: [], has_more: true, next_cursor: "evc_b" },
    { data: ["evt_1"], has_more: false, next_cursor: "evc_c" },
  ];
  let asked = 0;
  const client = new MessagingClient({
    baseUrl: "https://api.example.test/v2",
    clientId: "cid_test",
    clientSecret: "csec_test",
    fetch: async (input) => {
      const url = new URL(input);
      if (url.pathname === "/v2/oauth/token")
        return json({ access_token: "at_test", token_type: "bearer", expires_in: 3600 });
      const page = pages[asked++] ?? { data: [], has_more: false, next_cursor: "evc_c" };
      return json({
        object: "list",
        url: "/v2/events",
        has_more: page.has_more,
        next_cursor: page.next_cursor,
        data: page.data.map((id) => ({ object: "event", id, type: "message.read", created: 1, data: {} })),
      });
    },
  });
  const started = Date.now();
  // A minimum wait of 2 s a sleep: two waits would take 4 s.
  for await (const event of client.events.consume({ types: ["message.read"], minWaitMs: 2_000 })) {
    expect(event.id).toBe("evt_1");
    break;
  }
  expect(asked).toBe(3);
  expect(Date.now() - started).toBeLessThan(1_500);
});
