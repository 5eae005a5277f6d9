import { migrate } from "../../db/migrate.ts";
import type { CliCommands } from "../command.ts";

/** `db`: the schema. */
export const DATABASE_COMMANDS: CliCommands = {
  "db migrate": {
    usage: "Apply the SQL migrations not applied yet (every other command does it first).",
    run: async ({ db }) => ({ object: "migrations", applied: await migrate(db) }),
  },
};
