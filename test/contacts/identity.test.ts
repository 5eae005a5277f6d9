import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ProviderIdentity } from "../../src/channel/identity.ts";
import {
  findContactByUserId,
  type IdentityInput,
  recipientOf,
  resolveContactRef,
  resolveIdentities,
  resolveIdentity,
} from "../../src/contacts/identity.ts";
import { sequenceFeed } from "../../src/feed/sequencer.ts";
import { newId } from "../../src/ids.ts";
import { storeMessages } from "../../src/messages/store.ts";
import { createShop, freshPhone, type Shop } from "../support/fixtures.ts";
import { call, createTestEnv, type TestEnv } from "../support/index.ts";

let env: TestEnv;
let shop: Shop;

beforeAll(async () => {
  env = await createTestEnv();
  shop = await createShop(env, "Identity shop");
});
afterAll(() => env.close());

let counter = 0;
const freshUserId = () => `DE.${Date.now()}${++counter}`;

function who(fields: Partial<ProviderIdentity>): IdentityInput {
  return {
    tenantId: shop.tenantId,
    identity: { phone: null, userId: null, parentUserId: null, username: null, name: null, ...fields },
  };
}

const contact = (id: string) =>
  env.deps.db.selectFrom("contacts").selectAll().where("id", "=", id).executeTakeFirstOrThrow();

/** A received message of `contactId` (visible, unread), as finalize writes it. */
async function inboundOf(contactId: string, at: Date, text = "hi") {
  const [stored] = await storeMessages(env.deps.db, [
    {
      id: newId("msg"),
      tenantId: shop.tenantId,
      senderId: shop.sender.id,
      direction: "inbound",
      contactId,
      phone: null,
      contactName: null,
      windowFrom: at,
      type: "text",
      preview: text,
      text,
      mediaType: null,
      mediaFilename: null,
      status: null,
      applicationId: null,
      content: null,
      providerMessageId: `wamid.${newId("msg")}`,
      createdAt: at,
      visible: true,
    },
  ]);
  return stored as { id: string };
}

describe("identity resolution (DESIGN §14)", () => {
  test("rule 3 then 1: a new BSUID-only person is created once, and found again; the phone is learned", async () => {
    const userId = freshUserId();
    const id = await resolveIdentity(env.deps.db, who({ userId, username: "ana", name: "Ana" }));
    const again = await resolveIdentity(env.deps.db, who({ userId }));
    expect(again).toBe(id);
    const row = await contact(id);
    expect(row).toMatchObject({
      phone: null,
      user_id: userId,
      username: "ana",
      name: "Ana",
      merged_into: null,
    });
    expect(recipientOf(row)).toEqual({ userId });
    const phone = freshPhone();
    expect(await resolveIdentity(env.deps.db, who({ userId, phone }))).toBe(id);
    expect((await contact(id)).phone).toBe(phone);
    expect(recipientOf(await contact(id))).toEqual({ phone });
  });

  test("rule 2: a contact known by phone gains the BSUID; contacts with a phone stay as they are", async () => {
    const phone = freshPhone();
    const byPhone = await resolveIdentity(env.deps.db, who({ phone, name: "Bo" }));
    expect(await contact(byPhone)).toMatchObject({ phone, user_id: null, name: "Bo" });
    expect(await resolveIdentity(env.deps.db, who({ phone }))).toBe(byPhone);
    const userId = freshUserId();
    expect(await resolveIdentity(env.deps.db, who({ phone, userId, parentUserId: "US.ENT.77" }))).toBe(
      byPhone,
    );
    expect(await contact(byPhone)).toMatchObject({ phone, user_id: userId, parent_user_id: "US.ENT.77" });
    expect((await findContactByUserId(env.deps.db, shop.tenantId, userId))?.id).toBe(byPhone);
    expect((await findContactByUserId(env.deps.db, shop.tenantId, "US.ENT.77"))?.id).toBe(byPhone);
  });

  test("rule 4: a phone-only and a BSUID-only contact of one person merge, the younger into the older", async () => {
    const phone = freshPhone();
    const userId = freshUserId();
    const older = await resolveIdentity(env.deps.db, who({ phone, name: "Cy" }));
    await Bun.sleep(5);
    const younger = await resolveIdentity(env.deps.db, who({ userId, username: "cy" }));
    expect(younger).not.toBe(older);
    const t0 = new Date(Date.now() - 60_000);
    await inboundOf(older, t0, "from the phone");
    const moved = await inboundOf(younger, new Date(t0.getTime() + 1000), "from the username");
    await inboundOf(younger, new Date(t0.getTime() + 2000), "STOP-like but not");
    await env.deps.db.updateTable("contacts").set({ opted_out_at: t0 }).where("id", "=", younger).execute();

    const survivor = await resolveIdentity(env.deps.db, who({ phone, userId }));
    expect(survivor).toBe(older);
    expect(await contact(older)).toMatchObject({ phone, user_id: userId, username: "cy", name: "Cy" });
    expect((await contact(older)).opted_out_at).not.toBeNull();
    expect(await contact(younger)).toMatchObject({ phone: null, user_id: null, merged_into: older });
    const message = await env.deps.db
      .selectFrom("messages")
      .select("contact_id")
      .where("id", "=", moved.id)
      .executeTakeFirstOrThrow();
    expect(message.contact_id).toBe(older);
    const conversations = await env.deps.db
      .selectFrom("conversations")
      .selectAll()
      .where("contact_id", "in", [older, younger])
      .execute();
    expect(conversations).toHaveLength(1);
    expect(conversations[0]).toMatchObject({ contact_id: older, unread: 3 });
    expect(await resolveContactRef(env.deps.db, shop.tenantId, younger)).toBe(older);
    expect(await resolveContactRef(env.deps.db, shop.tenantId, older)).toBe(older);
    expect(await resolveContactRef(env.deps.db, shop.tenantId, "ctc_none")).toBeUndefined();
    // Both keys find the survivor from now on.
    expect(await resolveIdentity(env.deps.db, who({ userId }))).toBe(older);
    expect(await resolveIdentity(env.deps.db, who({ phone }))).toBe(older);

    // The event log: one contact.merged naming the survivor and the merged id.
    await sequenceFeed(env.deps.db);
    const events = await env.deps.db
      .selectFrom("events")
      .selectAll()
      .where("tenant_id", "=", shop.tenantId)
      .where("type", "=", "contact.merged")
      .where("contact_id", "=", older)
      .execute();
    expect(events.map((e) => e.data)).toEqual([{ merged: [younger] }]);
    const listed = await call(env.app, "GET", "/v2/events?types=contact.merged", { token: shop.token });
    expect(listed.status).toBe(200);
    const merged = (listed.body as { data: { type: string; data: unknown }[] }).data;
    expect(merged.find((e) => (e.data as { survivor: { id: string } }).survivor.id === older)).toMatchObject({
      type: "contact.merged",
      data: {
        survivor: { object: "contact", id: older, phone, user_id: userId, username: "cy", name: "Cy" },
        merged: [younger],
      },
    });
  });

  test("two resolutions racing for the same new person make one contact", async () => {
    for (let round = 0; round < 5; round++) {
      const phone = freshPhone();
      const userId = freshUserId();
      const ids = await Promise.all([
        resolveIdentity(env.deps.db, who({ userId })),
        resolveIdentity(env.deps.db, who({ phone, userId })),
        resolveIdentity(env.deps.db, who({ userId, username: "racer" })),
        resolveIdentity(env.deps.db, who({ phone, userId })),
      ]);
      expect(new Set(ids).size).toBe(1);
      const rows = await env.deps.db
        .selectFrom("contacts")
        .select("id")
        .where("tenant_id", "=", shop.tenantId)
        .where((eb) => eb.or([eb("phone", "=", phone), eb("user_id", "=", userId)]))
        .execute();
      expect(rows).toHaveLength(1);
    }
  });

  test("a batch resolves many identities at once, the same person twice included", async () => {
    const phones = [freshPhone(), freshPhone(), freshPhone()];
    const userIds = [freshUserId(), freshUserId(), freshUserId()];
    const ids = await resolveIdentities(env.deps.db, [
      who({ phone: phones[0], userId: userIds[0] }),
      who({ userId: userIds[1] }),
      who({ phone: phones[2] }),
      who({ userId: userIds[1], phone: phones[1] }),
      who({ phone: phones[2], userId: userIds[2] }),
    ]);
    expect(ids[1]).toBe(ids[3]!);
    expect(ids[2]).toBe(ids[4]!);
    expect(new Set(ids).size).toBe(3);
    expect(await contact(ids[1]!)).toMatchObject({ phone: phones[1], user_id: userIds[1] });
    expect(await contact(ids[2]!)).toMatchObject({ phone: phones[2], user_id: userIds[2] });
  });

  test("user_changed_number: the new phone replaces the old, which no longer finds the person", async () => {
    const phone = freshPhone();
    const newPhone = freshPhone();
    const userId = freshUserId();
    const id = await resolveIdentity(env.deps.db, who({ phone, userId }));
    const changed = await resolveIdentity(env.deps.db, {
      ...who({ phone, userId }),
      change: { kind: "number", newPhone },
    });
    expect(changed).toBe(id);
    expect(await contact(id)).toMatchObject({ phone: newPhone, user_id: userId });
    const stranger = await resolveIdentity(env.deps.db, who({ phone }));
    expect(stranger).not.toBe(id);
  });

  test("user_changed_user_id: the new BSUID replaces the old, which still finds the person", async () => {
    const phone = freshPhone();
    const userId = freshUserId();
    const newUserId = freshUserId();
    const id = await resolveIdentity(env.deps.db, who({ phone, userId }));
    expect(
      await resolveIdentity(env.deps.db, { ...who({ userId }), change: { kind: "user_id", newUserId } }),
    ).toBe(id);
    expect(await contact(id)).toMatchObject({ phone, user_id: newUserId });
    expect(await resolveIdentity(env.deps.db, who({ userId }))).toBe(id);
    expect(await resolveIdentity(env.deps.db, who({ userId: newUserId }))).toBe(id);
    expect((await findContactByUserId(env.deps.db, shop.tenantId, userId))?.id).toBe(id);
  });

  test("a number that comes with another person's BSUID belongs to them now", async () => {
    const phone = freshPhone();
    const first = await resolveIdentity(env.deps.db, who({ phone, userId: freshUserId() }));
    const second = await resolveIdentity(env.deps.db, who({ phone, userId: freshUserId() }));
    expect(second).not.toBe(first);
    expect((await contact(first)).phone).toBeNull();
    expect((await contact(second)).phone).toBe(phone);
  });
});
