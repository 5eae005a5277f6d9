import type { Db } from "../../db/connect.ts";
import { createPanelUser, PASSWORD_MIN_LENGTH, UserInputError } from "../../users/service.ts";
import { type CliCommands, CliError, required } from "../command.ts";
import { requireTenant } from "./tenants.ts";

/** `user`: the panel's users. */

export function presentUser(user: { id: string; tenantId: string; email: string }) {
  return { object: "user", id: user.id, tenant: user.tenantId, email: user.email };
}

export async function panelUserOrCliError(db: Db, tenantId: string, email: string, password: string) {
  try {
    return await createPanelUser(db, { tenantId, email, password });
  } catch (error) {
    if (error instanceof UserInputError)
      throw new CliError("invalid_flag", `--${error.field}: ${error.message}`);
    throw error;
  }
}

export const USER_COMMANDS: CliCommands = {
  "user create": {
    usage: "Create a panel user.",
    flags: {
      tenant: "!the tenant's ten_ id",
      email: "!the sign-in address",
      password: `!at least ${PASSWORD_MIN_LENGTH} characters`,
    },
    run: async ({ db }, flags) => {
      const tenant = await requireTenant(db, required(flags, "tenant"));
      return presentUser(
        await panelUserOrCliError(db, tenant.id, required(flags, "email"), required(flags, "password")),
      );
    },
  },
};
