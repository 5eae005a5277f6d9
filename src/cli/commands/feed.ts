import { bumpFeedEpoch } from "../../feed/repository.ts";
import type { CliCommands } from "../command.ts";

/** `feed`: the feed's cursors. */
export const FEED_COMMANDS: CliCommands = {
  // After a restore or failover (DESIGN §6): every older feed cursor restarts at 0.
  "feed bump-epoch": {
    usage: "After a restore or failover: every older feed cursor restarts at 0.",
    run: async ({ db }) => ({ object: "feed_epoch", epoch: await bumpFeedEpoch(db) }),
  },
};
