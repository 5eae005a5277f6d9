import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { newId } from "../../src/ids.ts";
import { finalizeInbound } from "../../src/inbound/finalize.ts";
import type { SenderRow } from "../../src/senders/repository.ts";
import { addSender, outboundMessages, sentTo } from "../support/fixtures.ts";
import { createTestEnv, deliverOne, type TestEnv } from "../support/index.ts";
import { type PanelClient, signedInClient } from "../support/panel.ts";

/**
 * Issue 43 (DESIGN §14) in the panel: a customer without a phone shows its username, else its BSUID;
 * search finds them by either; a merged contact's old address opens the survivor; a reply goes out
 * through the API's send path, addressed by BSUID.
 */

let env: TestEnv;
let client: PanelClient;
let sender: SenderRow;
const PHONE_NUMBER_ID = "661000000000043";

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { anonymous: 10_000, token: 10_000 } });
  const signedIn = await signedInClient(env.app, env.deps, { tenantName: "Phoneless Shop" });
  client = signedIn.client;
  sender = await addSender(env, signedIn.tenant.id, {
    phoneNumber: "+15550166043",
    phoneNumberId: PHONE_NUMBER_ID,
    wabaId: "761000000000043",
    name: "Phoneless support",
    templates: true,
  });
});
afterAll(() => env.close());

/** A customer who withholds their number writes (the simulator's user_id without `from`): their contact. */
async function phonelessCustomerWrites(userId: string, text: string, username?: string): Promise<string> {
  const response = await fetch(`${env.simulatorUrl}/_sim/inbound`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ phone_number_id: PHONE_NUMBER_ID, user_id: userId, username, type: "text", text }),
  });
  const sent = (await response.json()) as { id: string; webhook_status: number };
  expect({ status: response.status, webhook: sent.webhook_status }).toEqual({ status: 200, webhook: 200 });
  const outcome = await finalizeInbound(env.deps.db, env.clock, sent.id);
  if (!outcome) throw new Error("the phone-less inbound was not stored");
  const row = await env.deps.db
    .selectFrom("messages")
    .select("contact_id")
    .where("id", "=", outcome.messageId)
    .executeTakeFirstOrThrow();
  return row.contact_id;
}

/** The ids of the contacts the list shows, in order. */
const listIds = (text: string) =>
  [...text.matchAll(/id="conversation-(ctc_[0-9A-Za-z]+)"/g)].map((m) => m[1]);

/** The one row of the list for this contact (its <li>). */
function listRow(text: string, contactId: string): string {
  const start = text.indexOf(`id="conversation-${contactId}"`);
  if (start < 0) throw new Error(`no row for ${contactId}`);
  return text.slice(text.lastIndexOf("<li", start), text.indexOf("</li>", start));
}

describe("customers without a phone number", () => {
  let withUsername: string;
  let bsuidOnly: string;

  beforeAll(async () => {
    withUsername = await phonelessCustomerWrites("DE.4300000000001", "hi, it's me", "jonas.k");
    bsuidOnly = await phonelessCustomerWrites("DE.4300000000002", "hello there");
    // No profile names: what identifies them is all the panel has to show.
    await env.deps.db
      .updateTable("contacts")
      .set({ name: null })
      .where("id", "in", [withUsername, bsuidOnly])
      .execute();
  });

  test("the list and the conversation show the username, else the BSUID", async () => {
    const list = await client.get("/panel/conversations");
    expect(list.status).toBe(200);
    expect(listRow(list.text, withUsername)).toContain('<span class="conversation-name">jonas.k</span>');
    expect(listRow(list.text, bsuidOnly)).toContain(
      '<span class="conversation-name">DE.4300000000002</span>',
    );
    expect(list.text).not.toContain("Unknown contact");

    const page = await client.get(`/panel/conversations/${withUsername}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain("<h1>jonas.k</h1>");
    const other = await client.get(`/panel/conversations/${bsuidOnly}`);
    expect(other.text).toContain("<h1>DE.4300000000002</h1>");

    // With a profile name, the name leads and the username stands where a phone number would.
    await env.deps.db.updateTable("contacts").set({ name: "Jonas" }).where("id", "=", withUsername).execute();
    const named = await client.get("/panel/conversations");
    expect(listRow(named.text, withUsername)).toContain('<span class="conversation-name">Jonas</span>');
    expect(listRow(named.text, withUsername)).toContain('<span class="conversation-phone">jonas.k</span>');
    const namedPage = await client.get(`/panel/conversations/${withUsername}`);
    expect(namedPage.text).toContain(
      '<p class="conversation-contact"><span class="mono">jonas.k</span> · WhatsApp</p>',
    );
  });

  test("search finds them by username or by BSUID, whole or in part, any case", async () => {
    for (const q of ["jonas.k", "JONAS", "DE.4300000000001", "4300000000001"]) {
      const found = await client.get(`/panel/conversations?q=${encodeURIComponent(q)}`);
      expect(listIds(found.text), q).toEqual([withUsername]);
    }
    const byBsuid = await client.get("/panel/conversations?q=de.4300000000002");
    expect(listIds(byBsuid.text)).toEqual([bsuidOnly]);
  });

  test("a merged contact's old address opens the survivor's conversation", async () => {
    const survivor = await env.deps.db
      .selectFrom("contacts")
      .select("tenant_id")
      .where("id", "=", withUsername)
      .executeTakeFirstOrThrow();
    const merged = newId("ctc");
    await env.deps.db
      .insertInto("contacts")
      .values({
        id: merged,
        tenant_id: survivor.tenant_id,
        phone: null,
        name: null,
        merged_into: withUsername,
      })
      .execute();
    const old = await client.get(`/panel/conversations/${merged}`);
    expect(old.status).toBe(303);
    expect(old.headers.get("location")).toBe(`/panel/conversations/${withUsername}`);
  });

  test("a reply goes through the send path and out by the customer's BSUID", async () => {
    const view = await client.get(`/panel/conversations/${bsuidOnly}`);
    const key = /name="idempotency_key" value="([^"]+)"/.exec(view.text)?.[1];
    if (!key) throw new Error("no reply form");
    const posted = await client.post(`/panel/conversations/${bsuidOnly}/messages`, {
      kind: "text",
      body: "Thanks! Your parcel arrives today.",
      idempotency_key: key,
    });
    expect(posted.status).toBe(303);
    const sent = await outboundMessages(env.deps.db, bsuidOnly);
    expect(sent).toHaveLength(1);
    expect(await deliverOne(env.deps, sent[0]!.id!)).toBe("sent");
    const [wire] = await sentTo(env, PHONE_NUMBER_ID, sent[0]!.id!);
    expect(wire?.payload.recipient).toBe("DE.4300000000002");
    expect(wire?.payload.to).toBeUndefined();
    expect(sender.active).toBe(true);
  });
});
