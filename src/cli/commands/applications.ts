import { type ApplicationRecord, listTenantApplications } from "../../applications/repository.ts";
import {
  createApplication,
  MAX_SECRET_OVERLAP_SECONDS,
  parseScopes,
  previousSecretValidUntil,
  revokeApplication,
  rotateApplicationSecret,
} from "../../applications/service.ts";
import { systemClock } from "../../clock.ts";
import { DEFAULT_LIMITS } from "../../http/rate-limit.ts";
import { ALL_SCOPES } from "../../http/request-state.ts";
import { type CliCommands, CliError, DURATION_UNITS, optionalInteger, required } from "../command.ts";
import { requireTenant } from "./tenants.ts";

/** `app`: a tenant's API applications (OAuth clients) and their secrets. */

/** `--overlap`: seconds, or a number with s, m, h or d ("90m", "24h", "7d"); at most 30 days. */
function parseOverlap(value: string | undefined): number {
  if (value === undefined) return 0;
  const match = /^(\d{1,7})([smhd]?)$/.exec(value.trim());
  const seconds = match ? Number(match[1]) * (DURATION_UNITS[match[2] || "s"] ?? 1) : Number.NaN;
  if (!Number.isInteger(seconds) || seconds > MAX_SECRET_OVERLAP_SECONDS) {
    throw new CliError(
      "invalid_flag",
      `--overlap takes a duration such as 0, 3600, 90m, 24h or 7d, at most ${MAX_SECRET_OVERLAP_SECONDS / 86_400}d`,
    );
  }
  return seconds;
}

export function presentApplication(application: ApplicationRecord, clientSecret?: string, now = new Date()) {
  const previousUntil = previousSecretValidUntil(application, now);
  return {
    object: "application",
    client_id: application.clientId,
    ...(clientSecret && { client_secret: clientSecret }),
    name: application.name,
    scopes: application.scopes.join(" "),
    tenant: application.tenantId,
    read_limit: application.readLimit,
    send_limit: application.sendLimit,
    revoked: application.revokedAt !== null,
    created: Math.floor(application.createdAt.getTime() / 1000),
    // While a rotation's overlap runs: when the replaced secret stops working (Unix seconds).
    ...(previousUntil &&
      !application.revokedAt && { previous_secret_valid_until: Math.floor(previousUntil.getTime() / 1000) }),
  };
}

export const APPLICATION_COMMANDS: CliCommands = {
  "app create": {
    usage: "Create an API application and print its client_id and client_secret (shown only here).",
    flags: {
      tenant: "!the tenant's ten_ id",
      name: "!its name",
      scopes: `space-separated, any of: ${ALL_SCOPES.join(" ")} (default: all of them)`,
      "read-limit": `read requests per second (default ${DEFAULT_LIMITS.read})`,
      "send-limit": `send requests per second (default ${DEFAULT_LIMITS.send})`,
    },
    run: async ({ db }, flags) => {
      const tenant = await requireTenant(db, required(flags, "tenant"));
      const scopes = flags.scopes === undefined ? undefined : parseScopes(flags.scopes);
      if (flags.scopes !== undefined && !scopes) {
        throw new CliError(
          "invalid_flag",
          `--scopes takes one or more of ${ALL_SCOPES.join(", ")}, space-separated`,
        );
      }
      const { application, clientSecret } = await createApplication(db, {
        tenantId: tenant.id,
        name: required(flags, "name"),
        scopes,
        readLimit: optionalInteger(flags, "read-limit", 1),
        sendLimit: optionalInteger(flags, "send-limit", 1),
      });
      return presentApplication(application, clientSecret);
    },
  },

  "app list": {
    usage: "List a tenant's applications, revoked ones too.",
    flags: { tenant: "!the tenant's ten_ id" },
    run: async ({ db }, flags) => {
      const tenant = await requireTenant(db, required(flags, "tenant"));
      const applications = await listTenantApplications(db, tenant.id);
      return { object: "list", data: applications.map((application) => presentApplication(application)) };
    },
  },

  "app revoke": {
    usage: "Revoke an application: no new tokens; issued ones work until they expire.",
    flags: { "client-id": "!its cid_ id" },
    run: async ({ db }, flags) => {
      const application = await revokeApplication(db, required(flags, "client-id"), systemClock);
      if (!application) throw new CliError("application_not_found", `No application ${flags["client-id"]}`);
      return presentApplication(application);
    },
  },

  "app rotate-secret": {
    usage: "Give an application a new client_secret; the old one stops working at once, or after --overlap.",
    flags: {
      "client-id": "!its cid_ id",
      overlap:
        "how long the old secret keeps working: seconds, or 90m, 24h, 7d (default 0: it stops at once; at most 30d)",
    },
    run: async ({ db }, flags) => {
      const seconds = parseOverlap(flags.overlap);
      const rotated = await rotateApplicationSecret(
        db,
        required(flags, "client-id"),
        {},
        {
          seconds,
          now: systemClock.now(),
        },
      );
      if (!rotated) throw new CliError("application_not_found", `No application ${flags["client-id"]}`);
      return presentApplication(rotated.application, rotated.clientSecret);
    },
  },
};
