import { createWhatsAppProvider } from "../../src/channel/whatsapp.ts";
import { systemClock } from "../../src/clock.ts";
import type { Db } from "../../src/db/connect.ts";
import { insertSender, type SenderRow } from "../../src/senders/repository.ts";
import { syncSenderTemplates } from "../../src/senders/template-sync.ts";

/**
 * The benches' sender: a number of the simulator (token "sim-access-token"), inserted for the
 * tenant, its templates synced from the simulator the way the maintenance worker syncs them. Fails
 * when the sync did not bring `order_shipped`/en, the template every bench sends.
 */
export async function simulatorSender(
  db: Db,
  providerTokenKey: Buffer,
  simulatorUrl: string,
  sender: {
    tenantId: string;
    name?: string;
    phoneNumber: string;
    providerPhoneNumberId: string;
    wabaId: string;
    mps?: number;
  },
): Promise<SenderRow> {
  const row = await insertSender(db, providerTokenKey, { ...sender, accessToken: "sim-access-token" });
  const templates = await syncSenderTemplates(
    {
      config: { providerTokenKey },
      db,
      clock: systemClock,
      provider: createWhatsAppProvider({ baseUrl: simulatorUrl }),
    },
    row,
  );
  if (!templates.some((t) => t.name === "order_shipped" && t.language === "en" && t.status === "APPROVED")) {
    throw new Error("the template sync did not bring order_shipped/en");
  }
  return row;
}
