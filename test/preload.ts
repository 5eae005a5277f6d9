import { setDefaultTimeout } from "bun:test";

// bunfig's [test] timeout is ignored by this Bun; integration tests talk to real services.
setDefaultTimeout(30_000);
// Send retries back off from this base; tests should not wait seconds for a retry.
process.env.SEND_RETRY_BASE_MS ??= "100";
