import { describe, expect, test } from "bun:test";
import { isBsuid, isParentBsuid } from "../../src/channel/identity.ts";
import { parseWebhook, readInboundEvent, statusFailure } from "../../src/channel/webhook-events.ts";
import {
  buildWebhook,
  userChangedNumberMessage,
  userChangedUserIdMessage,
  type WireUser,
  wireAuthor,
  wireContact,
  wireRecipient,
} from "../../src/channel/webhook-payloads.ts";

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

/** The stored payloads of a body's messages, read back. */
function readAll(content: Record<string, unknown>) {
  const [change] = parseWebhook(bodyWith(content));
  return change!.received.map((event) => readInboundEvent(JSON.parse(event.payload)));
}

const BSUID = "DE.1502576394655843";
/** A user who adopted a username and withholds the phone (DESIGN §14). */
const HIDDEN: WireUser = {
  phone: "4915100000009",
  phoneShared: false,
  userId: BSUID,
  username: "ana.k",
  name: "Ana",
};

describe("identity (DESIGN §14)", () => {
  test("isBsuid: a country, a dot, [ENT.], 1 to 128 alphanumerics; nothing else", () => {
    for (const good of [BSUID, "US.ENT.11815799212886844830", "BR.a", `US.${"9".repeat(128)}`]) {
      expect(isBsuid(good)).toBe(true);
    }
    for (const bad of [
      "de.1502576394655843",
      "D.1",
      "DE1502",
      "DE.",
      `US.${"9".repeat(129)}`,
      "+4915100000001",
      "DE.15-02",
      42,
    ]) {
      expect(isBsuid(bad)).toBe(false);
    }
    expect(isParentBsuid("US.ENT.11815799212886844830")).toBe(true);
    expect(isParentBsuid(BSUID)).toBe(false);
  });

  test("a message without `from` but with `from_user_id` is read, never passed over", () => {
    const [read] = readAll({
      contacts: [wireContact(HIDDEN)],
      messages: [
        {
          ...wireAuthor(HIDDEN),
          id: "wamid.p1",
          timestamp: "1790100000",
          type: "text",
          text: { body: "hi" },
        },
      ],
    });
    expect(read).toMatchObject({
      identity: { phone: null, userId: BSUID, parentUserId: null, username: "ana.k", name: "Ana" },
      from: "",
      profileName: "Ana",
      identityChange: null,
      type: "text",
      text: "hi",
      system: false,
    });
  });

  test("a contact's user_id alone names the author; a message that names nobody is passed over", () => {
    const [byContact] = readAll({
      contacts: [
        { profile: { name: "Bo" }, user_id: "US.13491208655302741918", parent_user_id: "US.ENT.1181" },
      ],
      messages: [{ id: "wamid.p2", type: "text", text: { body: "yo" } }],
    });
    expect(byContact?.identity).toEqual({
      phone: null,
      userId: "US.13491208655302741918",
      parentUserId: "US.ENT.1181",
      username: null,
      name: "Bo",
    });
    expect(
      readAll({
        messages: [{ id: "wamid.p3", from_user_id: "not a bsuid", type: "text", text: { body: "?" } }],
      }),
    ).toEqual([]);
  });

  test("a message with a phone reads as before, and names the BSUID too", () => {
    const shared = { ...HIDDEN, phoneShared: true };
    const [read] = readAll({
      contacts: [wireContact(shared)],
      messages: [{ ...wireAuthor(shared), id: "wamid.p4", type: "text", text: { body: "hi" } }],
    });
    expect(read).toMatchObject({
      identity: { phone: "+4915100000009", userId: BSUID, username: "ana.k", name: "Ana" },
      from: "4915100000009",
      profileName: "Ana",
    });
    // Before 2026: no BSUID at all.
    expect(readOne({ type: "text", text: { body: "x" } }).identity).toEqual({
      phone: "+4915100000001",
      userId: null,
      parentUserId: null,
      username: null,
      name: null,
    });
  });

  test("statuses name their recipient: recipient_id when shared, recipient_user_id, recipient_parent_user_id", () => {
    const [change] = parseWebhook(
      bodyWith({
        contacts: [wireContact({ ...HIDDEN, parentUserId: "DE.ENT.77" })],
        statuses: [
          {
            id: "wamid.s1",
            status: "read",
            timestamp: "1790100000",
            ...wireRecipient({ ...HIDDEN, parentUserId: "DE.ENT.77" }),
          },
          {
            id: "wamid.s2",
            status: "sent",
            timestamp: "1790100000",
            recipient_id: "4915100000001",
            recipient_user_id: "DE.9",
          },
          { id: "wamid.s3", status: "sent", timestamp: "1790100000", recipient_id: "4915100000002" },
        ],
      }),
    );
    expect(change!.statuses.map((status) => status.identity)).toEqual([
      { phone: null, userId: BSUID, parentUserId: "DE.ENT.77", username: "ana.k", name: "Ana" },
      { phone: "+4915100000001", userId: "DE.9", parentUserId: null, username: null, name: null },
      { phone: "+4915100000002", userId: null, parentUserId: null, username: null, name: null },
    ]);
  });

  test("user_changed_number: a system message carrying the new phone", () => {
    const shared = { ...HIDDEN, phoneShared: true };
    const [read] = readAll({
      messages: [
        userChangedNumberMessage(shared, "+4915100000010", { id: "wamid.n1", timestamp: "1790100000" }),
      ],
    });
    expect(read).toMatchObject({
      identity: { phone: "+4915100000009", userId: BSUID },
      type: "system_user_changed_number",
      system: true,
      identityChange: { kind: "user_changed_number", newPhone: "+4915100000010", newUserId: null },
    });
    // A number change that also regenerated the BSUID says so; the pre-2026 notice still reads.
    const [regenerated, legacy] = readAll({
      messages: [
        {
          from: "4915100000009",
          id: "wamid.n2",
          type: "system",
          system: {
            type: "user_changed_number",
            wa_id: "4915100000011",
            user_id: "DE.2",
            previous_user_id: BSUID,
          },
        },
        {
          from: "4915100000009",
          id: "wamid.n3",
          type: "system",
          system: { type: "customer_changed_number", new_wa_id: "4915100000012" },
        },
      ],
    });
    expect(regenerated?.identity.userId).toBe(BSUID);
    expect(regenerated?.identityChange).toEqual({
      kind: "user_changed_number",
      newPhone: "+4915100000011",
      newUserId: "DE.2",
    });
    expect(legacy?.identityChange).toEqual({
      kind: "user_changed_number",
      newPhone: "+4915100000012",
      newUserId: null,
    });
  });

  test("user_changed_user_id: the old BSUID names the user, the new one is the change (no phone)", () => {
    const [read] = readAll({
      messages: [userChangedUserIdMessage(HIDDEN, "DE.77", { id: "wamid.u1", timestamp: "1790100000" })],
    });
    expect(read).toMatchObject({
      identity: { phone: null, userId: BSUID },
      type: "system_user_changed_user_id",
      system: true,
      identityChange: { kind: "user_changed_user_id", newUserId: "DE.77", newParentUserId: null },
    });
    // Named only inside the notice (previous_user_id), it is still read.
    const [inner] = readAll({
      messages: [
        {
          id: "wamid.u2",
          type: "system",
          system: { type: "user_changed_user_id", user_id: "DE.78", previous_user_id: BSUID },
        },
      ],
    });
    expect(inner?.identity.userId).toBe(BSUID);
    expect(inner?.identityChange).toMatchObject({ newUserId: "DE.78" });
  });
});
