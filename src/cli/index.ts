import { parseArgs } from "node:util";
import { type ApplicationRecord, listTenantApplications } from "../applications/repository.ts";
import {
  createApplication,
  MAX_SECRET_OVERLAP_SECONDS,
  parseScopes,
  previousSecretValidUntil,
  revokeApplication,
  rotateApplicationSecret,
} from "../applications/service.ts";
import { createWhatsAppProvider } from "../channel/whatsapp.ts";
import { systemClock } from "../clock.ts";
import { type Config, ConfigError, loadConfig } from "../config.ts";
import { toE164 } from "../contacts/phone.ts";
import { createDb, type Db, ensureDatabase } from "../db/connect.ts";
import { migrate } from "../db/migrate.ts";
import { bumpFeedEpoch } from "../feed/repository.ts";
import { DEFAULT_LIMITS } from "../http/rate-limit.ts";
import { randomBase62 } from "../ids.ts";
import { createRedis, type RedisClient, type RedisKeys, redisKeys } from "../redis/connect.ts";
import { presentSenderForOperator } from "../senders/presenter.ts";
import {
  findSenderById,
  findSenderByProviderPhoneNumberId,
  sealPlaintextAccessTokens,
} from "../senders/repository.ts";
import {
  approvedTemplateCount,
  type NewSender,
  registerSender,
  setSenderActivity,
  trySyncSenderTemplates,
} from "../senders/service.ts";
import { presentTemplateWithStatus } from "../templates/presenter.ts";
import { findTenant, insertTenant, setMessageRetention } from "../tenants/repository.ts";
import { createPanelUser, PASSWORD_MIN_LENGTH, UserInputError } from "../users/service.ts";

/**
 * Operator CLI (DESIGN §5): `bun run cli <group> <action> [--flags]`. Prints exactly one JSON object
 * on stdout and exits 0; on failure a JSON error on stderr and a non-zero exit.
 */

export class CliError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface CliContext {
  config: Config;
  db: Db;
  /** To announce a change of senders or templates to the api processes (their directory version). */
  redis: RedisClient;
  keys: RedisKeys;
}

type Flags = Record<string, string | undefined>;
export type CliCommand = (ctx: CliContext, flags: Flags) => Promise<unknown>;

function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (!value) throw new CliError("missing_flag", `--${name} is required`);
  return value;
}

function optionalInteger(flags: Flags, name: string, min: number): number | undefined {
  const value = flags[name];
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < min) {
    throw new CliError("invalid_flag", `--${name} must be an integer of at least ${min}`);
  }
  return Number(value);
}

const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `--overlap`: seconds, or a number with s, m, h or d ("90m", "24h", "7d"); at most 30 days. */
export function parseOverlap(value: string | undefined): number {
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

/** `--keep`: days, or a number with s, m, h or d ("400", "90d", "30m"); 1 minute to 3650 days. */
export function parseRetentionDays(value: string): number {
  const match = /^(\d{1,9})([smhd]?)$/.exec(value.trim());
  const seconds = match ? Number(match[1]) * (DURATION_UNITS[match[2] || "d"] ?? 1) : Number.NaN;
  if (!Number.isInteger(seconds) || seconds < 60 || seconds > 3650 * 86_400) {
    throw new CliError(
      "invalid_flag",
      "--keep takes a duration from 1 minute to 3650 days, such as 400 (days), 90d, 12h or 30m",
    );
  }
  return seconds / 86_400;
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

async function requireTenant(db: Db, tenantId: string) {
  const tenant = await findTenant(db, tenantId);
  if (!tenant) throw new CliError("tenant_not_found", `No tenant ${tenantId}`);
  return tenant;
}

/** What the simulator accepts; a real number needs its own token (--access-token). */
const SIMULATOR_ACCESS_TOKEN = "sim-access-token";

function templateSyncDeps({ db, config, redis, keys }: CliContext) {
  return {
    config,
    db,
    redis,
    keys,
    clock: systemClock,
    provider: createWhatsAppProvider({ baseUrl: config.whatsappGraphUrl }),
  };
}

/**
 * `sender create` and the seed. The sender is created even when the provider cannot be reached (the
 * maintenance worker syncs every active sender later); the output then says so in `warning`.
 */
async function createSender(ctx: CliContext, input: NewSender) {
  const duplicate = () =>
    new CliError(
      "duplicate_sender",
      `Provider phone-number id ${input.providerPhoneNumberId} belongs to a sender already; each number can be connected once`,
    );
  const taken = await findSenderByProviderPhoneNumberId(ctx.db, input.providerPhoneNumberId);
  if (taken) throw duplicate();
  let registered: Awaited<ReturnType<typeof registerSender>>;
  try {
    registered = await registerSender(templateSyncDeps(ctx), input);
  } catch (error) {
    // 23505 unique_violation: another process connected the same number just now.
    if ((error as { code?: string }).code === "23505") throw duplicate();
    throw error;
  }
  const { sender, sync } = registered;
  return {
    ...presentSenderForOperator(sender, await approvedTemplateCount(ctx.db, sender)),
    ...(!sync.ok && {
      warning: `Templates were not synced (${sync.reason}); the maintenance worker will sync them later.`,
    }),
  };
}

/** Extended by later parts (senders, users, feed); `seed` runs the steps in SEED_STEPS. */
export const COMMANDS: Record<string, CliCommand> = {
  "db migrate": async ({ db }) => ({ object: "migrations", applied: await migrate(db) }),

  "tenant create": async ({ db, config }, flags) => {
    const tenant = await insertTenant(db, {
      name: required(flags, "name"),
      dailyQuota: optionalInteger(flags, "daily-quota", 0),
    });
    return {
      object: "tenant",
      id: tenant.id,
      name: tenant.name,
      daily_quota: tenant.dailyQuota ?? config.dailySendQuota,
      message_retention_days: tenant.messageRetentionDays,
    };
  },

  "tenant retention": async ({ db }, flags) => {
    const tenant = await requireTenant(db, required(flags, "tenant"));
    const days = parseRetentionDays(required(flags, "keep"));
    await setMessageRetention(db, tenant.id, days);
    return { object: "tenant", id: tenant.id, name: tenant.name, message_retention_days: days };
  },

  "app create": async ({ db }, flags) => {
    const tenant = await requireTenant(db, required(flags, "tenant"));
    const scopes = flags.scopes === undefined ? undefined : parseScopes(flags.scopes);
    if (flags.scopes !== undefined && !scopes) {
      throw new CliError(
        "invalid_flag",
        "--scopes takes messaging:send and/or messaging:read, space-separated",
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

  "app list": async ({ db }, flags) => {
    const tenant = await requireTenant(db, required(flags, "tenant"));
    const applications = await listTenantApplications(db, tenant.id);
    return { object: "list", data: applications.map((application) => presentApplication(application)) };
  },

  "app revoke": async ({ db }, flags) => {
    const application = await revokeApplication(db, required(flags, "client-id"), systemClock);
    if (!application) throw new CliError("application_not_found", `No application ${flags["client-id"]}`);
    return presentApplication(application);
  },

  "app rotate-secret": async ({ db }, flags) => {
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

  "sender create": async (ctx, flags) => {
    const tenant = await requireTenant(ctx.db, required(flags, "tenant"));
    const phoneNumber = toE164(required(flags, "phone"));
    if (!phoneNumber) {
      throw new CliError("invalid_flag", "--phone must be a phone number in E.164 form, e.g. +15550100001");
    }
    return createSender(ctx, {
      tenantId: tenant.id,
      phoneNumber,
      providerPhoneNumberId: required(flags, "phone-number-id"),
      wabaId: required(flags, "waba-id"),
      accessToken: flags["access-token"] || SIMULATOR_ACCESS_TOKEN,
      name: flags.name || null,
      mps: optionalInteger(flags, "mps", 1),
    });
  },

  "sender deactivate": async (ctx, flags) => {
    const changed = await setSenderActivity(ctx, required(flags, "sender"), false);
    if (!changed) throw new CliError("sender_not_found", `No sender ${flags.sender}`);
    return {
      ...presentSenderForOperator(changed.sender, await approvedTemplateCount(ctx.db, changed.sender)),
      ...(!changed.announced && {
        warning: `Redis could not be told; api processes may still send from this sender for DIRECTORY_CACHE_MS (${ctx.config.directoryCacheMs} ms).`,
      }),
    };
  },

  // Once after upgrading to encrypted tokens (docs/operations.md, "Secrets at rest"); safe to repeat.
  "sender encrypt-tokens": async ({ db, config }) => ({
    object: "sender_tokens",
    encrypted: await sealPlaintextAccessTokens(db, config.providerTokenKey),
  }),

  "templates sync": async (ctx, flags) => {
    const sender = await findSenderById(ctx.db, required(flags, "sender"));
    if (!sender) throw new CliError("sender_not_found", `No sender ${flags.sender}`);
    const sync = await trySyncSenderTemplates(templateSyncDeps(ctx), sender);
    if (!sync.ok) throw new CliError("provider_unavailable", `Templates were not synced: ${sync.reason}`);
    return { object: "list", data: sync.templates.map(presentTemplateWithStatus) };
  },

  "user create": async ({ db }, flags) => {
    const tenant = await requireTenant(db, required(flags, "tenant"));
    return presentUser(
      await panelUserOrCliError(db, tenant.id, required(flags, "email"), required(flags, "password")),
    );
  },
};

function presentUser(user: { id: string; tenantId: string; email: string }) {
  return { object: "user", id: user.id, tenant: user.tenantId, email: user.email };
}

async function panelUserOrCliError(db: Db, tenantId: string, email: string, password: string) {
  try {
    return await createPanelUser(db, { tenantId, email, password });
  } catch (error) {
    if (error instanceof UserInputError)
      throw new CliError("invalid_flag", `--${error.field}: ${error.message}`);
    throw error;
  }
}

/** Steps of `seed`, each returning the part of the seed it made; later parts push theirs. */
export const SEED_STEPS: ((
  ctx: CliContext,
  seed: Record<string, unknown>,
) => Promise<Record<string, unknown>>)[] = [
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

COMMANDS.seed = async (ctx) => {
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
};

// After a restore or failover (DESIGN §6): every older feed cursor restarts at 0.
COMMANDS["feed bump-epoch"] = async ({ db }) => ({ object: "feed_epoch", epoch: await bumpFeedEpoch(db) });

interface Usage {
  summary: string;
  /** Flag -> what it takes; a leading "!" marks a required flag. */
  flags?: Record<string, string>;
}

/** What `--help` prints; every command has an entry (test/cli.test.ts checks), and its flags are the ones parsed. */
export const USAGE: Record<string, Usage> = {
  "db migrate": { summary: "Apply the SQL migrations not applied yet (every other command does it first)." },
  "tenant create": {
    summary: "Create a tenant (an account).",
    flags: {
      name: "!its name",
      "daily-quota": "messages per UTC day on each channel (default: DAILY_SEND_QUOTA)",
    },
  },
  "tenant retention": {
    summary:
      "Set how long the tenant's messages are kept (400 days unless set); the maintenance worker removes older ones.",
    flags: {
      tenant: "!the tenant's ten_ id",
      keep: '!days, or a duration with s, m, h or d ("400", "90d", "30m"); 1 minute to 3650 days',
    },
  },
  "app create": {
    summary: "Create an API application and print its client_id and client_secret (shown only here).",
    flags: {
      tenant: "!the tenant's ten_ id",
      name: "!its name",
      scopes: 'space-separated: "messaging:send messaging:read" (default: both)',
      "read-limit": `read requests per second (default ${DEFAULT_LIMITS.read})`,
      "send-limit": `send requests per second (default ${DEFAULT_LIMITS.send})`,
    },
  },
  "app list": {
    summary: "List a tenant's applications, revoked ones too.",
    flags: { tenant: "!the tenant's ten_ id" },
  },
  "app revoke": {
    summary: "Revoke an application: no new tokens; issued ones work until they expire.",
    flags: { "client-id": "!its cid_ id" },
  },
  "app rotate-secret": {
    summary:
      "Give an application a new client_secret; the old one stops working at once, or after --overlap.",
    flags: {
      "client-id": "!its cid_ id",
      overlap:
        "how long the old secret keeps working: seconds, or 90m, 24h, 7d (default 0: it stops at once; at most 30d)",
    },
  },
  "sender create": {
    summary: "Connect a WhatsApp number to a tenant and sync its templates.",
    flags: {
      tenant: "!the tenant's ten_ id",
      phone: "!the number, E.164 (+15550100001)",
      "phone-number-id": "!the provider's phone number id",
      "waba-id": "!the provider's business account id",
      "access-token": "the provider token (default: the simulator's)",
      name: "its display name",
      mps: "messages per second the send workers keep to (default 80)",
    },
  },
  "sender deactivate": { summary: "Stop sending from a sender.", flags: { sender: "!its snd_ id" } },
  "sender encrypt-tokens": {
    summary: "Encrypt provider tokens stored in plain text (once, after upgrading).",
  },
  "templates sync": {
    summary: "Fetch a sender's templates from the provider now.",
    flags: { sender: "!its snd_ id" },
  },
  "user create": {
    summary: "Create a panel user.",
    flags: {
      tenant: "!the tenant's ten_ id",
      email: "!the sign-in address",
      password: `!at least ${PASSWORD_MIN_LENGTH} characters`,
    },
  },
  seed: {
    summary:
      "Create the demo tenant, application, sender (phone_number_id 100000000000001) and panel user, once.",
  },
  "feed bump-epoch": { summary: "After a restore or failover: every older feed cursor restarts at 0." },
};

const FLAG_NAMES = [...new Set(Object.values(USAGE).flatMap((usage) => Object.keys(usage.flags ?? {})))];

const PROGRAM = "bun run cli";

function commandUsage(name: string, usage: Usage): string {
  const flags = Object.entries(usage.flags ?? {});
  const synopsis = flags
    .map(([flag, text]) => (text.startsWith("!") ? `--${flag} <value>` : `[--${flag} <value>]`))
    .join(" ");
  const width = Math.max(0, ...flags.map(([flag]) => flag.length)) + 4;
  const lines = flags.map(([flag, text]) => {
    const isRequired = text.startsWith("!");
    return `  ${`--${flag}`.padEnd(width)}${isRequired ? "(required) " : ""}${isRequired ? text.slice(1) : text}`;
  });
  return [
    `Usage: ${PROGRAM} ${name}${synopsis ? ` ${synopsis}` : ""}`,
    "",
    usage.summary,
    ...(lines.length > 0 ? ["", "Flags:", ...lines] : []),
  ].join("\n");
}

/** `--help` alone, or after a group (`app --help`): the commands; after a command: its flags. */
export function helpText(positionals: readonly string[]): string {
  const name = positionals.join(" ");
  const usage = USAGE[name];
  if (usage) return commandUsage(name, usage);
  const names = Object.keys(USAGE).filter((command) => name === "" || command.startsWith(`${name} `));
  const shown = names.length > 0 ? names : Object.keys(USAGE);
  const width = Math.max(...shown.map((command) => command.length)) + 2;
  return [
    `Usage: ${PROGRAM} <command> [--flag <value> ...]`,
    "",
    "Operator commands. Each prints one JSON object on stdout and exits 0; a failure prints",
    '{"error": {"code", "message"}} on stderr and exits 1. Configuration comes from the environment',
    "(DATABASE_URL, REDIS_URL, ...; see README.md).",
    "",
    "Commands:",
    ...shown.map((command) => `  ${command.padEnd(width)}${USAGE[command]?.summary ?? ""}`),
    "",
    `${PROGRAM} <command> --help shows a command's flags.`,
  ].join("\n");
}

export async function runCli(argv: string[], env = process.env): Promise<{ code: number; out: string }> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        ...Object.fromEntries(FLAG_NAMES.map((name) => [name, { type: "string" as const }])),
        help: { type: "boolean", short: "h" },
      },
    });
  } catch (error) {
    return fail("invalid_arguments", `${(error as Error).message}. See ${PROGRAM} --help.`);
  }
  if (parsed.values.help) return { code: 0, out: helpText(parsed.positionals) };
  const name = parsed.positionals.join(" ");
  const command = COMMANDS[name];
  if (!command) {
    return fail(
      "unknown_command",
      `Unknown command "${name}". Commands: ${Object.keys(COMMANDS).join(", ")}. See ${PROGRAM} --help.`,
    );
  }
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return fail("configuration_error", error.message);
    throw error;
  }
  let db: Db | undefined;
  let redis: RedisClient | undefined;
  try {
    await ensureDatabase(config.databaseUrl);
    db = createDb(config.databaseUrl, { max: 2, applicationName: "messaging-cli" });
    if (name !== "db migrate") await migrate(db);
    redis = createRedis(config, { connectionName: "messaging-cli" });
    const context = { config, db, redis, keys: redisKeys(config.redisPrefix) };
    const { help: _help, ...flags } = parsed.values;
    const result = await command(context, flags as Flags);
    return { code: 0, out: JSON.stringify(result) };
  } catch (error) {
    if (error instanceof CliError) return fail(error.code, error.message);
    return fail("failed", error instanceof Error ? error.message : String(error));
  } finally {
    redis?.disconnect();
    await db?.destroy();
  }
}

function fail(code: string, message: string) {
  return { code: 1, out: JSON.stringify({ error: { code, message } }) };
}

if (import.meta.main) {
  const { code, out } = await runCli(process.argv.slice(2));
  const stream = code === 0 ? process.stdout : process.stderr;
  // Flush before exiting: a write to a pipe is asynchronous and exit would cut it off.
  await new Promise<void>((resolve) => stream.write(`${out}\n`, () => resolve()));
  process.exit(code);
}
