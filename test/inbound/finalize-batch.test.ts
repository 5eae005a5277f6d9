import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { finalizeInbound, finalizePendingInbound } from "../../src/inbound/finalize.ts";
import { insertSender } from "../../src/senders/repository.ts";
import { insertTenant } from "../../src/tenants/repository.ts";
import { createTestEnv, type TestEnv } from "../support/index.ts";

let env: TestEnv;

beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(() => env.close());

interface Stored {
  id: string;
  tenantId: string;
  phone: string;
  timestamp: number;
  system: boolean;
  name: string | null;
}

describe("batched finalize", () => {
  test("two concurrent callers finalize a backlog of two tenants exactly once", async () => {
    const db = env.deps.db;
    const stored: Stored[] = [];
    for (const [t, suffix] of [
      [0, "1"],
      [1, "2"],
    ] as const) {
      const tenant = await insertTenant(db, { name: `Batch ${t}` });
      const sender = await insertSender(db, env.config.providerTokenKey, {
        tenantId: tenant.id,
        phoneNumber: `+1555020000${suffix}`,
        providerPhoneNumberId: `10910000000000${suffix}`,
        wabaId: `20910000000000${suffix}`,
        accessToken: "token",
      });
      const rows = [];
      // Six contacts with 15 messages each (timestamps out of order, every fifth a system
      // message), plus one contact that only ever sends system messages.
      for (let c = 0; c < 7; c++) {
        const from = `49151000${t}${String(c).padStart(4, "0")}`;
        const count = c === 6 ? 3 : 15;
        for (let m = 0; m < count; m++) {
          const id = `wamid.batch-${t}-${c}-${m}`;
          const system = c === 6 || m % 5 === 4;
          const timestamp = 1_790_100_000 + ((m * 7) % count) * 10 + c;
          // The first message brings no profile name: the first name the batch sees wins.
          const name = m === 0 ? null : `Customer ${t}-${c}-${m}`;
          const message = system
            ? { id, from, timestamp: String(timestamp), type: "system", system: { body: "changed number" } }
            : { id, from, timestamp: String(timestamp), type: "text", text: { body: `hello ${m}` } };
          rows.push({
            provider_message_id: id,
            tenant_id: tenant.id,
            sender_id: sender.id,
            payload: JSON.stringify({ message, contact: name ? { wa_id: from, profile: { name } } : null }),
          });
          stored.push({ id, tenantId: tenant.id, phone: `+${from}`, timestamp, system, name });
        }
      }
      await db.insertInto("inbound_events").values(rows).execute();
    }

    const drain = async () => {
      let total = 0;
      for (;;) {
        const outcomes = await finalizePendingInbound(db, env.clock, 20);
        total += outcomes.length;
        if (outcomes.length < 20) return total;
      }
    };
    const [a, b] = await Promise.all([drain(), drain()]);
    expect(a + b).toBe(stored.length);
    const providerIds = stored.map((s) => s.id);

    const events = await db
      .selectFrom("inbound_events")
      .select(["provider_message_id", "finalized_at", "message_id"])
      .where("provider_message_id", "in", providerIds)
      .execute();
    expect(events).toHaveLength(stored.length);
    expect(events.every((e) => e.finalized_at && e.message_id)).toBe(true);

    const messages = await db
      .selectFrom("messages")
      .select(["id", "seq", "provider_message_id", "contact_id", "type", "created_at"])
      .where("provider_message_id", "in", providerIds)
      .execute();
    expect(messages).toHaveLength(stored.length);
    const messageByProvider = new Map(messages.map((m) => [m.provider_message_id, m]));
    for (const e of events) expect(messageByProvider.get(e.provider_message_id)?.id).toBe(e.message_id!);
    for (const s of stored) {
      const m = messageByProvider.get(s.id)!;
      expect(m.type.startsWith("system_")).toBe(s.system);
      expect(Math.floor(m.created_at.getTime() / 1000)).toBe(s.timestamp);
    }

    // Contacts: one per (tenant, phone); window = newest non-system timestamp; a name they brought.
    const contacts = await db.selectFrom("contacts").selectAll().execute();
    const byContact = new Map<string, Stored[]>();
    for (const s of stored) {
      const key = `${s.tenantId} ${s.phone}`;
      byContact.set(key, [...(byContact.get(key) ?? []), s]);
    }
    expect(contacts).toHaveLength(byContact.size);
    const conversations = await db.selectFrom("conversations").selectAll().execute();
    const conversationOf = new Map(conversations.map((c) => [c.contact_id, c]));
    for (const contact of contacts) {
      const mine = byContact.get(`${contact.tenant_id} ${contact.phone}`)!;
      expect(mine).toBeDefined();
      for (const s of mine) expect(messageByProvider.get(s.id)!.contact_id).toBe(contact.id);
      const visible = mine.filter((s) => !s.system);
      const newest = Math.max(...visible.map((s) => s.timestamp));
      expect(contact.last_inbound_at?.getTime() ?? null).toBe(visible.length ? newest * 1000 : null);
      // Two drains run at once: the batch that commits a contact first names it (an existing name is
      // kept), so the name is one the contact's messages brought, not necessarily the earliest.
      const names = mine.flatMap((s) => (s.name ? [s.name] : []));
      if (names.length === 0) expect(contact.name).toBeNull();
      else expect(names).toContain(contact.name!);
      const conversation = conversationOf.get(contact.id);
      if (visible.length === 0) {
        expect(conversation).toBeUndefined();
        continue;
      }
      expect(conversation?.unread).toBe(visible.length);
      expect(Math.floor(conversation!.last_message_at.getTime() / 1000)).toBe(newest);
      const newestMessage = visible
        .map((s) => messageByProvider.get(s.id)!)
        .sort((x, y) => y.created_at.getTime() - x.created_at.getTime() || y.seq - x.seq)[0]!;
      expect(Number(conversation?.last_message_seq)).toBe(Number(newestMessage.seq));
    }

    // The feed hand-off: exactly the non-system messages.
    const pending = await db.selectFrom("feed_pending").select("message_id").execute();
    expect(new Set(pending.map((p) => p.message_id))).toEqual(
      new Set(stored.filter((s) => !s.system).map((s) => messageByProvider.get(s.id)!.id!)),
    );

    // Nothing is left, and finalizing one of them again changes nothing.
    expect(await finalizePendingInbound(db, env.clock)).toEqual([]);
    const again = await finalizeInbound(db, env.clock, stored[0]!.id);
    expect(again).toMatchObject({ created: false, messageId: messageByProvider.get(stored[0]!.id)!.id });
  });
});
