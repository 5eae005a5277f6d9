import { Elysia } from "elysia";
import type { AppDeps } from "../app.ts";
import { returnReservedQuota } from "../http/pipeline.ts";
import { requestState } from "../http/request-state.ts";
import { ErrorResponse } from "../http/schemas.ts";
import { scopeGuard } from "../http/scope.ts";
import { createMessageAcceptor } from "./accept.ts";
import { parseIdempotencyKey } from "./idempotency.ts";
import { presentAcceptedMessage } from "./presenter.ts";
import { MessageSchema, SendMessageRequest } from "./schemas.ts";

export function messageRoutes(deps: AppDeps) {
  const acceptOutboundMessage = createMessageAcceptor(deps);
  return new Elysia().use(scopeGuard).post(
    "/messages",
    async ({ auth, body, request, set }) => {
      const key = parseIdempotencyKey(request.headers.get("idempotency-key"));
      const outcome = await acceptOutboundMessage(auth, body, key);
      const state = requestState(request);
      if (outcome.replayed) {
        set.status = 200;
        set.headers["idempotency-replayed"] = "true";
        await returnReservedQuota(deps.redis, state);
      } else {
        set.status = 201;
        // This request created a message: its reserved quota unit stays spent.
        if (state) state.accepted = true;
      }
      return presentAcceptedMessage(outcome.message);
    },
    {
      scope: "messaging:send",
      body: SendMessageRequest,
      response: {
        200: MessageSchema,
        201: MessageSchema,
        400: ErrorResponse,
        401: ErrorResponse,
        403: ErrorResponse,
        404: ErrorResponse,
        409: ErrorResponse,
        429: ErrorResponse,
      },
      detail: {
        summary: "Send a message",
        description:
          "Sends an approved template, or free text inside the 24-hour window. With an `Idempotency-Key`, a repeated request returns the original message (200, `Idempotency-Replayed: true`) and sends nothing again.",
        tags: ["Messages"],
        parameters: [
          {
            name: "Idempotency-Key",
            in: "header",
            required: false,
            schema: { type: "string", maxLength: 255 },
            description: "1-255 printable ASCII characters; kept 24 hours per application.",
          },
        ],
      },
    },
  );
}
