import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { newId } from "../../src/ids.ts";
import { announceDirectoryChange } from "../../src/senders/directory-version.ts";
import type { SenderRow } from "../../src/senders/repository.ts";
import { setSenderActivity } from "../../src/senders/service.ts";
import { syncSenderTemplates } from "../../src/senders/template-sync.ts";
import { addSender, ORDER_SHIPPED, postMessage } from "../support/fixtures.ts";
import { createTenantWithApp, createTestEnv, getToken, type TestEnv } from "../support/index.ts";
import { signedInClient } from "../support/panel.ts";

// Issue 13 part 5: the send path caches a tenant's senders and templates for DIRECTORY_CACHE_MS
// (its default here, not support.ts's 0), yet a change is seen by the very next send.
let env: TestEnv;
let numbers = 0;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, env: { DIRECTORY_CACHE_MS: "3000" } });
});
afterAll(() => env.close());

/** A tenant of its own with `senderCount` active senders (templates synced) and a send token. */
async function tenantWithSenders(senderCount: number) {
  const creds = await createTenantWithApp(env.deps);
  const senders: SenderRow[] = [];
  for (let i = 0; i < senderCount; i++) {
    senders.push(await addSender(env, creds.tenant.id, { templates: true }));
  }
  const token = await getToken(env.app, creds.clientId, creds.clientSecret);
  const send = (body: Record<string, unknown> = {}) =>
    postMessage(env.app, token, {
      to: `+49151${String(++numbers).padStart(8, "0")}`,
      template: ORDER_SHIPPED,
      ...body,
    });
  return { tenantId: creds.tenant.id, senders, send };
}

const versionOf = (tenantId: string) => env.deps.redis.get(env.deps.keys.directoryVersion(tenantId));

/** A change made behind the service's back: Postgres only, no new directory version. */
async function deactivateSilently(senderId: string) {
  await env.deps.db.updateTable("senders").set({ active: false }).where("id", "=", senderId).execute();
}

describe("a change of sender or template is seen at once", () => {
  test("a deactivated sender: the very next send is 409", async () => {
    const { senders, send } = await tenantWithSenders(1);
    expect((await send()).status).toBe(201); // the directory is cached now
    const changed = await setSenderActivity(env.deps, senders[0]!.id, false);
    expect(changed?.announced).toBe(true);
    const refused = await send();
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe("messaging_window_closed");
  });

  test("two active senders, one deactivated: the next send without `sender` picks the other", async () => {
    const { senders, send } = await tenantWithSenders(2);
    const [first, second] = senders as [SenderRow, SenderRow];
    expect((await send({ sender: first.id })).status).toBe(201);
    const ambiguous = await send();
    expect([ambiguous.status, ambiguous.body.error.code]).toEqual([400, "parameter_missing"]);
    await setSenderActivity(env.deps, first.id, false);
    const chosen = await send();
    expect(chosen.status).toBe(201);
    expect(chosen.body.sender).toBe(second.id);
  });

  test("a template no longer approved after a sync: the next send is template_not_found", async () => {
    const { senders, send } = await tenantWithSenders(1);
    const sender = senders[0]!;
    expect((await send()).status).toBe(201);
    const real = env.deps.provider;
    const withoutShipped = {
      ...real,
      listTemplates: async (creds: Parameters<typeof real.listTemplates>[0]) =>
        (await real.listTemplates(creds)).filter((t) => t.name !== "order_shipped"),
    };
    await syncSenderTemplates({ ...env.deps, provider: withoutShipped }, sender);
    const refused = await send();
    expect([refused.status, refused.body.error.code]).toEqual([400, "template_not_found"]);
    // And back: the sync that approves it again is seen at once too.
    await syncSenderTemplates(env.deps, sender);
    expect((await send()).status).toBe(201);
  });

  test("a sync that changed nothing keeps the version (and the cache)", async () => {
    const { tenantId, senders, send } = await tenantWithSenders(1);
    expect((await send()).status).toBe(201);
    const before = await versionOf(tenantId);
    expect(before).not.toBeNull();
    await syncSenderTemplates(env.deps, senders[0]!);
    expect(await versionOf(tenantId)).toBe(before);
  });

  test("the cache is used while nothing announced a change, for DIRECTORY_CACHE_MS at most", async () => {
    const { tenantId, senders, send } = await tenantWithSenders(1);
    expect((await send()).status).toBe(201);
    await deactivateSilently(senders[0]!.id);
    // Postgres says inactive, but the version is unchanged: the cached directory answers.
    expect((await send()).status).toBe(201);
    await announceDirectoryChange(env.deps, tenantId);
    expect((await send()).status).toBe(409);
  });

  test("the cache expires after DIRECTORY_CACHE_MS even without a change announced", async () => {
    const { senders, send } = await tenantWithSenders(1);
    expect((await send()).status).toBe(201);
    await deactivateSilently(senders[0]!.id);
    await Bun.sleep(3100);
    expect((await send()).status).toBe(409);
  });

  test("a version Redis lost is not trusted: the next send reloads", async () => {
    const { tenantId, senders, send } = await tenantWithSenders(1);
    expect((await send()).status).toBe(201);
    const before = await versionOf(tenantId);
    await deactivateSilently(senders[0]!.id);
    await env.deps.redis.del(env.deps.keys.directoryVersion(tenantId));
    expect((await send()).status).toBe(409);
    // The admission created a new version, unlike any a cache held.
    const after = await versionOf(tenantId);
    expect(after).not.toBeNull();
    expect(after).not.toBe(before);
    expect(await env.deps.redis.ttl(env.deps.keys.directoryVersion(tenantId))).toBeGreaterThan(0);
  });

  test("a panel reply after a deactivation is refused at once too", async () => {
    // The panel's replies share the process's acceptor and cache; its admission carries the version.
    const signedIn = await signedInClient(env.app, env.deps);
    const sender = await addSender(env, signedIn.tenant.id);
    const contact = await env.deps.db
      .insertInto("contacts")
      .values({
        id: newId("ctc"),
        tenant_id: signedIn.tenant.id,
        phone: "+4915100777001",
        last_inbound_at: env.clock.now(),
      })
      .returning("id")
      .executeTakeFirstOrThrow();
    const path = `/panel/conversations/${contact.id}`;
    const reply = async (body: string) => {
      const page = await signedIn.client.get(path);
      const key = /name="idempotency_key" value="([^"]+)"/.exec(page.text)?.[1] ?? "";
      return signedIn.client.post(`${path}/messages`, { kind: "text", body, idempotency_key: key });
    };
    expect((await reply("first")).status).toBe(303);
    await setSenderActivity(env.deps, sender.id, false);
    const refused = await reply("second");
    expect(refused.status).not.toBe(303);
    expect(refused.text).toContain(`Sender ${sender.id} is not active.`);
  });
});
