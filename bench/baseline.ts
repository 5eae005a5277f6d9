/**
 * The baseline of bench/send.ts: what Bun + Elysia alone cost for the same request. One POST route
 * validating the very TypeBox schema of POST /v2/messages, answering a small JSON object with 201;
 * no authentication, Postgres or Redis. `BASELINE_PORT` (default 0: any free port) on 127.0.0.1.
 *
 *   bun bench/baseline.ts        # prints `baseline listening on http://127.0.0.1:<port>`
 */
import { Elysia } from "elysia";
import { SendMessageRequest } from "../src/messages/schemas.ts";
import { exitOnHelp } from "./lib/usage.ts";

exitOnHelp(`bun bench/baseline.ts   (BASELINE_PORT: its port, default any free one)
  Bun + Elysia alone behind POST /v2/messages (bench/send.ts's baseline): prints
  "baseline listening on http://127.0.0.1:<port>" and serves until stopped.`);

let next = 0;

const app = new Elysia({ normalize: false }) // as src/app.ts: unknown fields are refused, not dropped
  .post(
    "/v2/messages",
    ({ body, set }) => {
      set.status = 201;
      next += 1;
      return {
        object: "message",
        id: `msg_${next}`,
        status: "accepted",
        to: body.to ?? body.contact ?? null,
      };
    },
    { body: SendMessageRequest },
  )
  .get("/healthz", () => ({ status: "ok" }))
  .listen({ port: Number(process.env.BASELINE_PORT ?? 0), hostname: "127.0.0.1" });

console.log(`baseline listening on http://127.0.0.1:${app.server?.port}`);

const stop = () => {
  void app.stop(true).then(() => process.exit(0));
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
