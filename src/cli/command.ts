import type { Config } from "../config.ts";
import type { Db } from "../db/connect.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";

/**
 * What an operator command is (src/cli/index.ts keeps the table of them): its usage, the flags it
 * takes, and what it runs. Also the helpers the commands read their flags with.
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

export type Flags = Record<string, string | undefined>;

/** One row of the command table: `--help` prints `usage` and `flags`; the dispatcher parses `flags` and calls `run`. */
export interface CliCommand {
  /** The one-line summary `--help` shows. */
  usage: string;
  /** Flag -> what it takes; a leading "!" marks a required flag. These are the flags parsed. */
  flags?: Record<string, string>;
  /** Prints its result as one JSON object; a CliError becomes the JSON error. */
  run: (ctx: CliContext, flags: Flags) => Promise<unknown>;
}

export type CliCommands = Record<string, CliCommand>;

export function required(flags: Flags, name: string): string {
  const value = flags[name];
  if (!value) throw new CliError("missing_flag", `--${name} is required`);
  return value;
}

export function optionalInteger(flags: Flags, name: string, min: number): number | undefined {
  const value = flags[name];
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < min) {
    throw new CliError("invalid_flag", `--${name} must be an integer of at least ${min}`);
  }
  return Number(value);
}

/** Seconds in each unit a duration flag takes (`--overlap`, `--keep`). */
export const DURATION_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };
