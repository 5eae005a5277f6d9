import { describe, expect, test } from "bun:test";
import { parseWebhook, readInboundEvent, statusFailure } from "../../src/channel/webhook-events.ts";
import { buildWebhook } from "../../src/channel/webhook-payloads.ts";

/**
 * src/channel/webhook-events.ts, the one reader of the webhook wire format: what it keeps, what it
 * passes over, and how a stored message reads back (types the simulator does not send included).
 */

const ACCOUNT = {
  wabaId: "209000000000001",
  phoneNumberId: "109000000000001",
  displayPhoneNumber: "15550100001",
};

/** A message as the provider may send it: any shape, built like a real webhook's. */
function bodyWith(content: Record<string, unknown>) {
  return buildWebhook(ACCOUNT, content as never);
}

/** The stored payload of the one message a body carries, read back. */
function readOne(message: Record<string, unknown>, contact?: Record<string, unknown>) {
  const [change] = parseWebhook(
    bodyWith({
      messages: [{ id: "wamid.1", from: "4915100000001", ...message }],
      contacts: contact && [contact],
    }),
  );
  expect(change?.received).toHaveLength(1);
  return readInboundEvent(JSON.parse(change!.received[0]!.payload));
}

describe("parseWebhook", () => {
  test("keeps well-formed messages and statuses, passes over the rest", () => {
    const changes = parseWebhook(
      bodyWith({
        messages: [
          { id: "wamid.ok", from: "4915100000001", type: "text", text: { body: "hi" } },
          { id: "wamid.no-author", type: "text", text: { body: "lost" } },
          { from: "4915100000001", type: "text" },
        ],
        statuses: [
          {
            id: "wamid.s",
            status: "failed",
            timestamp: "1790100000",
            errors: [{ code: 131026, title: "Undeliverable" }],
            biz_opaque_callback_data: "x".repeat(600),
          },
          { id: "wamid.s", status: "deleted", timestamp: "1790100000" },
          { status: "sent" },
        ],
      }),
    );
    expect(changes).toHaveLength(1);
    const [change] = changes;
    expect(change!.phoneNumberId).toBe(ACCOUNT.phoneNumberId);
    expect(change!.received.map((r) => r.providerMessageId)).toEqual(["wamid.ok"]);
    expect(change!.statuses).toHaveLength(1);
    const status = change!.statuses[0]!;
    expect(status).toMatchObject({ providerMessageId: "wamid.s", status: "failed" });
    expect(status.at).toEqual(new Date(1_790_100_000_000));
    expect(status.clientReference).toHaveLength(512);
    expect(statusFailure(JSON.parse(status.errors!))).toMatchObject({
      code: "recipient_invalid",
      retryable: false,
    });
  });

  test("anything but a WhatsApp messages change carries nothing", () => {
    expect(parseWebhook(null)).toEqual([]);
    expect(parseWebhook({ object: "page", entry: [] })).toEqual([]);
    expect(
      parseWebhook({ object: "whatsapp_business_account", entry: [{ changes: [{ field: "x" }] }] }),
    ).toEqual([]);
  });
});

describe("readInboundEvent", () => {
  test("the author's profile name and the provider's time", () => {
    const read = readOne(
      { type: "text", text: { body: "hello" }, timestamp: "1790100000" },
      { wa_id: "4915100000001", profile: { name: "Ana" } },
    );
    expect(read).toMatchObject({ from: "4915100000001", profileName: "Ana", type: "text", system: false });
    expect(read.sentAt).toEqual(new Date(1_790_100_000_000));
    expect(readOne({ type: "text", text: { body: "x" }, timestamp: "soon" }).sentAt).toBeUndefined();
  });

  test("types the simulator does not send read as history shows them", () => {
    expect(readOne({ type: "sticker", sticker: { mime_type: "image/webp" } })).toMatchObject({
      type: "image",
      preview: "[image: image.webp]",
      mediaFilename: null,
    });
    expect(
      readOne({ type: "location", location: { latitude: 52.5, longitude: 13.4, name: "Office" } }),
    ).toMatchObject({ type: "text", text: "Office (52.5, 13.4)", system: false });
    expect(readOne({ type: "interactive", interactive: { list_reply: { title: "Tuesday" } } })).toMatchObject(
      {
        type: "text",
        preview: "Tuesday",
      },
    );
    expect(readOne({ type: "reaction", reaction: { emoji: "👍" } })).toMatchObject({
      type: "system_reaction",
      text: "reacted 👍",
      system: true,
    });
    expect(readOne({ type: "unsupported" })).toMatchObject({
      type: "system_unsupported",
      preview: "[unsupported]",
    });
  });
});
