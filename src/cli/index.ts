import { parseArgs } from "node:util";
import { type Config, ConfigError, loadConfig } from "../config.ts";
import { createDb, type Db, ensureDatabase } from "../db/connect.ts";
import { migrate } from "../db/migrate.ts";
import { createRedis, type RedisClient, redisKeys } from "../redis/connect.ts";
import { type CliCommands, CliError, type Flags } from "./command.ts";
import { APPLICATION_COMMANDS } from "./commands/applications.ts";
import { DATABASE_COMMANDS } from "./commands/database.ts";
import { FEED_COMMANDS } from "./commands/feed.ts";
import { SEED_COMMANDS } from "./commands/seed.ts";
import { SENDER_COMMANDS } from "./commands/senders.ts";
import { TENANT_COMMANDS } from "./commands/tenants.ts";
import { USER_COMMANDS } from "./commands/users.ts";
import { helpText, PROGRAM } from "./help.ts";

/**
 * Operator CLI (DESIGN §5): `bun run cli <group> <action> [--flags]`. Prints exactly one JSON object
 * on stdout and exits 0; on failure a JSON error on stderr and a non-zero exit.
 */

/** The one table of commands, in the order `--help` lists them: the dispatcher and `--help` both read it. */
export const COMMANDS: CliCommands = {
  ...DATABASE_COMMANDS,
  ...TENANT_COMMANDS,
  ...APPLICATION_COMMANDS,
  ...SENDER_COMMANDS,
  ...USER_COMMANDS,
  ...SEED_COMMANDS,
  ...FEED_COMMANDS,
};

/** Each command's one-line usage (test/cli/cli.test.ts reads it), from the table: every command has one. */
export const USAGE: Record<string, string> = Object.fromEntries(
  Object.entries(COMMANDS).map(([name, command]) => [name, command.usage]),
);

const FLAG_NAMES = [
  ...new Set(Object.values(COMMANDS).flatMap((command) => Object.keys(command.flags ?? {}))),
];

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
  if (parsed.values.help) return { code: 0, out: helpText(COMMANDS, parsed.positionals) };
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
    const result = await command.run(context, flags as Flags);
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
