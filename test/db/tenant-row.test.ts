/**
 * findTenantRow (src/db/tenant-row.ts), the one lookup of a tenant's row by its id that the
 * contacts, senders, media and webhook-endpoint repositories share: it reads the table it names,
 * and only the tenant's own row.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { findTenantRow } from "../../src/db/tenant-row.ts";
import { createShop, receive } from "../support/fixtures.ts";
import { createTestEnv, type TestEnv } from "../support/index.ts";

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { token: 1000 } });
});
afterAll(() => env.close());

test("a tenant's own row by id, whole; another tenant's id, an unknown id or another table's id: none", async () => {
  const { db } = env.deps;
  const mine = await createShop(env, "Row owner");
  const theirs = await createShop(env, "Row neighbour");
  const { contactId } = await receive(env, mine, { from: "4915100090001", type: "text", text: "hi" });

  const sender = await findTenantRow(db, "senders", mine.tenantId, mine.sender.id);
  expect(sender).toEqual(mine.sender);
  const contact = await findTenantRow(db, "contacts", mine.tenantId, contactId);
  expect(contact).toMatchObject({ id: contactId, tenant_id: mine.tenantId, phone: "+4915100090001" });

  expect(await findTenantRow(db, "senders", theirs.tenantId, mine.sender.id)).toBeUndefined();
  expect(await findTenantRow(db, "contacts", theirs.tenantId, contactId)).toBeUndefined();
  expect(await findTenantRow(db, "senders", mine.tenantId, "snd_unknown000000000000000")).toBeUndefined();
  expect(await findTenantRow(db, "contacts", mine.tenantId, mine.sender.id)).toBeUndefined();
});
