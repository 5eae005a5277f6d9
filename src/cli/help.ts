import type { CliCommand, CliCommands } from "./command.ts";

/** What `--help` prints, read from the command table (src/cli/index.ts). */

export const PROGRAM = "bun run cli";

function commandUsage(name: string, command: CliCommand): string {
  const flags = Object.entries(command.flags ?? {});
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
    command.usage,
    ...(lines.length > 0 ? ["", "Flags:", ...lines] : []),
  ].join("\n");
}

/** `--help` alone, or after a group (`app --help`): the commands; after a command: its flags. */
export function helpText(commands: CliCommands, positionals: readonly string[]): string {
  const name = positionals.join(" ");
  const command = commands[name];
  if (command) return commandUsage(name, command);
  const names = Object.keys(commands).filter((each) => name === "" || each.startsWith(`${name} `));
  const shown = names.length > 0 ? names : Object.keys(commands);
  const width = Math.max(...shown.map((each) => each.length)) + 2;
  return [
    `Usage: ${PROGRAM} <command> [--flag <value> ...]`,
    "",
    "Operator commands. Each prints one JSON object on stdout and exits 0; a failure prints",
    '{"error": {"code", "message"}} on stderr and exits 1. Configuration comes from the environment',
    "(DATABASE_URL, REDIS_URL, ...; see README.md).",
    "",
    "Commands:",
    ...shown.map((each) => `  ${each.padEnd(width)}${commands[each]?.usage ?? ""}`),
    "",
    `${PROGRAM} <command> --help shows a command's flags.`,
  ].join("\n");
}
