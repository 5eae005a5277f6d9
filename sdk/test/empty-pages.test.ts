/**
 * Issue 42 item 6: GET /v2/events?types=… looks at a bounded part of the log a call, so a page may be
 * empty with `has_more` true. The consumer asks again at once instead of waiting as at the head.
 */
import { expect, test } from "bun:test";
import { stubEventsClient } from "./stub-events.ts";

test("events.consume asks again at once after an empty page with has_more", async () => {
  const pages = [
    { data: [], has_more: true, next_cursor: "evc_a" },
    { data: [], has_more: true, next_cursor: "evc_b" },
    { data: ["evt_1"], has_more: false, next_cursor: "evc_c" },
  ];
  let asked = 0;
  const client = stubEventsClient(
    () => pages[asked++] ?? { data: [], has_more: false, next_cursor: "evc_c" },
  );
  const started = Date.now();
  // A minimum wait of 2 s a sleep: two waits would take 4 s.
  for await (const event of client.events.consume({ types: ["message.read"], minWaitMs: 2_000 })) {
    expect(event.id).toBe("evt_1");
    break;
  }
  expect(asked).toBe(3);
  expect(Date.now() - started).toBeLessThan(1_500);
});
