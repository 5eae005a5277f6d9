import { createHash, timingSafeEqual } from "node:crypto";
import { Elysia, t } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { SIGNATURE_HEADER, verifySignature } from "../channel/signature.ts";
import { parseJsonBytes } from "../http/body.ts";
import { noteRefused, requestState, throwBodyProblem } from "../http/request-state.ts";
import { type RoutePolicy, routePolicy } from "../http/route-policy.ts";
import { createWebhookIngest } from "./ingest.ts";

/** Up to 3 MB, read raw (the signature is checked before a parse); a caller that keeps failing is cut off. */
const WEBHOOK_POLICY: RoutePolicy = { limit: "webhook-rejections", body: "webhook" };

/**
 * The provider's webhook (outside /v2): GET verification handshake, POST events. An event is in
 * Postgres before the provider gets its 200, so a crash after that loses nothing, and a retry of
 * the same event is stored once.
 */
export function webhookRoutes(deps: AppDeps) {
  const ingest = createWebhookIngest(deps);
  return (
    new Elysia({ prefix: "/webhooks" })
      .use(routePolicy)
      // The routes' own refusals (401, 403) count against the caller (WEBHOOK_POLICY), before the
      // answer leaves; thrown ones are counted by the error renderer.
      .onAfterHandle(({ request, set }) => noteRefused(request, set.status))
      .get(
        "/whatsapp",
        ({ query, set }) => {
          if (
            query["hub.mode"] === "subscribe" &&
            sameSecret(query["hub.verify_token"] ?? "", deps.config.whatsappVerifyToken)
          ) {
            set.headers["content-type"] = "text/plain; charset=utf-8";
            return query["hub.challenge"] ?? "";
          }
          set.status = 403;
          return { error: "verification failed" };
        },
        {
          policy: WEBHOOK_POLICY,
          query: t.Object(
            {
              "hub.mode": t.Optional(t.String()),
              "hub.verify_token": t.Optional(t.String()),
              "hub.challenge": t.Optional(t.String()),
            },
            { additionalProperties: true },
          ),
          detail: { hide: true },
        },
      )
      .post(
        "/whatsapp",
        async ({ request, set }) => {
          // The pipeline read the bytes (capped) and parsed nothing: authenticate them first, so an
          // unsigned body costs one HMAC, never a parse (src/http/body.ts).
          const state = requestState(request);
          if (state?.bodyProblem) deps.metrics.webhookRejected.inc({ reason: "bad_body" });
          throwBodyProblem(request);
          const raw = state?.rawBody ?? new Uint8Array();
          if (!verifySignature(raw, request.headers.get(SIGNATURE_HEADER), deps.config.whatsappAppSecret)) {
            deps.metrics.webhookRejected.inc({ reason: "bad_signature" });
            set.status = 401;
            return { error: "invalid signature" };
          }
          let body: unknown;
          try {
            // What the provider sends is taken, NULs replaced (refusing it would only be retried).
            body = parseJsonBytes(raw, "replace");
          } catch (error) {
            deps.metrics.webhookRejected.inc({ reason: "bad_body" });
            throw error;
          }
          // Durable (and the workers nudged) when this resolves: committed together with the
          // webhooks that arrived alongside it.
          const result = await ingest.submit(body);
          deps.metrics.webhookEvents.inc({ kind: "message" }, result.inbound.length);
          deps.metrics.webhookEvents.inc({ kind: "status" }, result.statusEvents);
          if (result.unknownNumbers.length === 0) return { received: true };
          deps.metrics.webhookRejected.inc({ reason: "unknown_phone_number" }, result.unknownNumbers.length);
          // Still a 200 (the provider would retry anything else for days), but the sender of a test
          // webhook (the simulator's control API) learns that its events were dropped.
          return { received: true, unknown_phone_number_ids: [...new Set(result.unknownNumbers)] };
        },
        { policy: WEBHOOK_POLICY, body: t.Unknown(), detail: { hide: true } },
      )
  );
}

/** Compares digests, so the time taken says nothing about the secret or its length. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (value: string) => createHash("sha256").update(value, "utf8").digest();
  return timingSafeEqual(digest(given), digest(expected));
}
