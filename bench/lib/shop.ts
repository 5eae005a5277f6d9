/**
 * The benches' customer: a tenant, its OAuth applications and (optionally) its sender, written
 * straight into the database the way the panel and the CLI write them. Tokens come afterwards,
 * from the running api (./token.ts).
 */
import { createApplication } from "../../src/applications/service.ts";
import type { Db } from "../../src/db/connect.ts";
import { insertSender } from "../../src/senders/repository.ts";
import { insertTenant } from "../../src/tenants/repository.ts";
import { simulatorSender } from "./simulator-sender.ts";
import type { Credentials } from "./token.ts";

export interface ShopSpec {
  /** The tenant's name. */
  name: string;
  /** The tenant's daily quota; absent: none. */
  dailyQuota?: number;
  /** Its applications, all with these limits (absent: the defaults); none when absent. */
  apps?: {
    /** How many (1). */
    count?: number;
    /** The name of the i-th (from 0). */
    name: string | ((i: number) => string);
    sendLimit?: number;
    readLimit?: number;
  };
  /**
   * Its sender. With `simulatorUrl`: a number of the simulator with its templates synced from it
   * (./simulator-sender.ts). Without: a row only, for benches that never send.
   */
  sender?: {
    name?: string;
    phoneNumber: string;
    providerPhoneNumberId: string;
    wabaId: string;
    mps?: number;
    simulatorUrl?: string;
  };
}

export interface Shop {
  tenantId: string;
  /** The applications' credentials, in creation order. */
  apps: Credentials[];
  /** The sender's id, when the spec had one. */
  senderId?: string;
}

/** Creates the tenant, then its applications, then its sender. */
export async function createShop(db: Db, providerTokenKey: Buffer, spec: ShopSpec): Promise<Shop> {
  const tenant = await insertTenant(db, {
    name: spec.name,
    ...(spec.dailyQuota !== undefined && { dailyQuota: spec.dailyQuota }),
  });
  const apps: Credentials[] = [];
  for (let i = 0; i < (spec.apps ? (spec.apps.count ?? 1) : 0); i++) {
    const { name, sendLimit, readLimit } = spec.apps!;
    const { application, clientSecret } = await createApplication(db, {
      tenantId: tenant.id,
      name: typeof name === "string" ? name : name(i),
      ...(sendLimit !== undefined && { sendLimit }),
      ...(readLimit !== undefined && { readLimit }),
    });
    apps.push({ clientId: application.clientId, clientSecret });
  }
  if (!spec.sender) return { tenantId: tenant.id, apps };
  const { simulatorUrl, ...sender } = spec.sender;
  const row = simulatorUrl
    ? await simulatorSender(db, providerTokenKey, simulatorUrl, { tenantId: tenant.id, ...sender })
    : await insertSender(db, providerTokenKey, { tenantId: tenant.id, ...sender, accessToken: "bench" });
  return { tenantId: tenant.id, apps, senderId: row.id };
}
