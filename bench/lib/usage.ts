/**
 * `--help` (or `-h`) for every bench: prints its usage and exits before anything starts (no server,
 * database or process is made for a question). Call it first, before the arguments are parsed.
 */
export function exitOnHelp(usage: string, args: readonly string[] = process.argv.slice(2)): void {
  if (!args.some((arg) => arg === "--help" || arg === "-h")) return;
  console.log(usage.trim());
  process.exit(0);
}
