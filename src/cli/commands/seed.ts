import { createApplication } from "../../applications/service.ts";
import { randomBase62 } from "../../ids.ts";
import { insertTenant } from "../../tenants/repository.ts";
import { type CliCommands, type CliContext, CliError } from "../command.ts";
import { presentApplication } from "./applications.ts";
import { createSender, SIMULATOR_ACCESS_TOKEN } from "./senders.ts";
import { panelUserOrCliError, presentUser } from "./users.ts";

/** `seed`: a demo tenant with an application, a sender on the simulator and a panel user, made once. */

/** Steps of `seed`, each returning the part of the seed it made. */
const SEED_STEPS: ((ctx: CliContext, seed: Record<string, unknown>) => Promise<Record<string, unknown>>)[] = [
  async ({ db, config }) => {
    const tenant = await insertTenant(db, { name: "Demo Shop" });
    return {
      tenant: { object: "tenant", id: tenant.id, name: tenant.name, daily_quota: config.dailySendQuota },
    };
  },
  async ({ db }, seed) => {
    const tenantId = (seed.tenant as { id: string }).id;
    const { application, clientSecret } = await createApplication(db, { tenantId, name: "Demo application" });
    return { application: presentApplication(application, clientSecret) };
  },
  async (ctx, seed) => {
    const tenantId = (seed.tenant as { id: string }).id;
    const sender = await createSender(ctx, {
      tenantId,
      name: "Demo Shop",
      phoneNumber: "+15550100001",
      providerPhoneNumberId: "100000000000001",
      wabaId: "200000000000001",
      accessToken: SIMULATOR_ACCESS_TOKEN,
    });
    return { sender };
  },
  async ({ db }, seed) => {
    const tenantId = (seed.tenant as { id: string }).id;
    // Printed once, like the client secret; the demo tenant is seeded only once.
    const password = randomBase62(16);
    const user = await panelUserOrCliError(db, tenantId, "demo@example.com", password);
    return { user: { ...presentUser(user), password } };
  },
];

export const SEED_COMMANDS: CliCommands = {
  seed: {
    usage:
      "Create the demo tenant, application, sender (phone_number_id 100000000000001) and panel user, once.",
    run: async (ctx) => {
      // Once: a second seed would make a second demo tenant, which is never what anyone wants.
      const existing = await ctx.db
        .selectFrom("tenants")
        .select("id")
        .where("name", "=", "Demo Shop")
        .executeTakeFirst();
      if (existing) throw new CliError("already_seeded", `The demo tenant exists already (${existing.id})`);
      const seed: Record<string, unknown> = {};
      for (const step of SEED_STEPS) Object.assign(seed, await step(ctx, seed));
      return { object: "seed", ...seed };
    },
  },
};
