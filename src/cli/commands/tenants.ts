import type { Db } from "../../db/connect.ts";
import { effectiveDailyQuota } from "../../senders/quota.ts";
import {
  findTenant,
  insertTenant,
  MIN_MESSAGE_RETENTION_DAYS,
  setMessageRetention,
} from "../../tenants/repository.ts";
import { type CliCommands, CliError, DURATION_UNITS, optionalInteger, required } from "../command.ts";

/** `tenant`: accounts, and the tenant lookup the other commands' `--tenant` goes through. */

export async function requireTenant(db: Db, tenantId: string) {
  const tenant = await findTenant(db, tenantId);
  if (!tenant) throw new CliError("tenant_not_found", `No tenant ${tenantId}`);
  return tenant;
}

const MAX_RETENTION_DAYS = 3650;
const KEEP_BOUNDS = `from ${MIN_MESSAGE_RETENTION_DAYS} to ${MAX_RETENTION_DAYS} days`;

/**
 * `--keep`: days, or a number with s, m, h or d ("400", "90d", "72h"), from 2 days (longer than an
 * Idempotency-Key's 24 hours: a replay must find its message) to 3650 days.
 */
function parseRetentionDays(value: string): number {
  const match = /^(\d{1,9})([smhd]?)$/.exec(value.trim());
  const seconds = match ? Number(match[1]) * (DURATION_UNITS[match[2] || "d"] ?? 1) : Number.NaN;
  if (!Number.isInteger(seconds) || seconds > MAX_RETENTION_DAYS * 86_400) {
    throw new CliError(
      "invalid_flag",
      `--keep takes a duration ${KEEP_BOUNDS}, such as 400 (days), 90d or 72h`,
    );
  }
  if (seconds < MIN_MESSAGE_RETENTION_DAYS * 86_400) {
    throw new CliError(
      "invalid_flag",
      `--keep must be at least ${MIN_MESSAGE_RETENTION_DAYS} days: an Idempotency-Key is kept 24 hours, and a replayed key must still find its message`,
    );
  }
  return seconds / 86_400;
}

export const TENANT_COMMANDS: CliCommands = {
  "tenant create": {
    usage: "Create a tenant (an account).",
    flags: {
      name: "!its name",
      "daily-quota": "messages per UTC day on each channel (default: DAILY_SEND_QUOTA)",
    },
    run: async ({ db, config }, flags) => {
      const tenant = await insertTenant(db, {
        name: required(flags, "name"),
        dailyQuota: optionalInteger(flags, "daily-quota", 0),
      });
      return {
        object: "tenant",
        id: tenant.id,
        name: tenant.name,
        daily_quota: effectiveDailyQuota(tenant.dailyQuota, config.dailySendQuota),
        message_retention_days: tenant.messageRetentionDays,
      };
    },
  },

  "tenant retention": {
    usage:
      "Set how long the tenant's messages are kept (400 days unless set, at least 2); the maintenance worker removes older ones.",
    flags: {
      tenant: "!the tenant's ten_ id",
      keep: '!days, or a duration with s, m, h or d ("400", "90d", "72h"); 2 to 3650 days',
    },
    run: async ({ db }, flags) => {
      const tenant = await requireTenant(db, required(flags, "tenant"));
      const days = parseRetentionDays(required(flags, "keep"));
      await setMessageRetention(db, tenant.id, days);
      return { object: "tenant", id: tenant.id, name: tenant.name, message_retention_days: days };
    },
  },
};
