import { setDefaultTimeout } from "bun:test";

// bunfig's [test] timeout is ignored by this Bun; integration tests talk to real services.
setDefaultTimeout(30_000);
