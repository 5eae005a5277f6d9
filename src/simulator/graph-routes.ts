import { setTimeout as sleep } from "node:timers/promises";
import { Elysia, t } from "elysia";
import { TEMPLATE_CATALOGUE } from "./catalogue.ts";
import {
  describeFailure,
  describeValidation,
  GraphError,
  graphErrorResponse,
  graphParameterPath,
  unknownPathResponse,
} from "./errors.ts";
import { newNumericId, newWamid } from "./ids.ts";
import { storedMedia } from "./media-store.ts";
import { sandboxBehaviour } from "./sandbox.ts";
import { GraphVersionParams, openObject, SendBody, UPLOAD_LIMITS, UploadBody } from "./schemas.ts";
import { checkSend } from "./send-checks.ts";
import type { SimulatorLog, SimulatorOptions, SimulatorState } from "./state.ts";
import { forgetOldUsers, rememberUser, userByPhone, userByUserId, wireUserOf } from "./users.ts";
import type { WebhookSender } from "./webhook-sender.ts";

/**
 * The Graph routes: sends (checked, throttled, recorded, then their status webhooks scheduled),
 * media upload, the template catalogue, and retrieving received media.
 */

const DEFAULT_KEEP_SENDS = 100_000;
const DEFAULT_TEMPLATE_PAGE_SIZE = 25;

/** Where a media id's bytes are served, like Graph's lookaside URL (it, too, needs the token). */
const MEDIA_DOWNLOAD_PATH = "/whatsapp_business/attachments";

/** Graph requests carry `Authorization: Bearer <token>`; any non-empty token is accepted. */
function requireBearer(authorization: string | undefined) {
  if (!/^Bearer\s+\S+/i.test(authorization ?? "")) {
    throw new GraphError(190, "Cannot parse access token: send Authorization: Bearer <token>.");
  }
}

/** Template cursors: the position of an item in the catalogue, opaque to callers as Graph's are. */
function encodeCursor(position: number): string {
  return Buffer.from(String(position)).toString("base64url");
}

function decodeCursor(cursor: string): number {
  const position = Buffer.from(cursor, "base64url").toString();
  if (!/^\d+$/.test(position)) throw new GraphError(100, "Param after is not a valid cursor.");
  return Number(position);
}

/**
 * Past `keepSends`, the oldest tenth is forgotten at once (records and wamids alike; amortized, not
 * one shift per send). A status posted later for a forgotten wamid needs its phone number and
 * recipient given, as for any unknown one.
 */
function forgetOldSends(state: SimulatorState, keepSends: number): void {
  const slack = Math.max(1, Math.floor(keepSends / 10));
  if (state.sent.length > keepSends + slack) {
    const drop = state.sent.length - keepSends;
    state.sent.splice(0, drop);
    state.forgottenSends += drop;
  }
  if (state.accepted.size > keepSends + slack) {
    let drop = state.accepted.size - keepSends;
    for (const wamid of state.accepted.keys()) {
      if (drop-- <= 0) break;
      state.accepted.delete(wamid);
    }
  }
  forgetOldUsers(state, keepSends);
}

/** False when this number has used up its throughput: the send is answered with 130429. */
function takeThroughput(state: SimulatorState, phoneNumberId: string): boolean {
  if (state.mps <= 0) return true;
  const now = performance.now();
  const bucket = state.buckets.get(phoneNumberId) ?? { tokens: state.mps, at: now };
  bucket.tokens = Math.min(state.mps, bucket.tokens + ((now - bucket.at) * state.mps) / 1000);
  bucket.at = now;
  state.buckets.set(phoneNumberId, bucket);
  if (bucket.tokens < 1) return false;
  bucket.tokens -= 1;
  return true;
}

export function graphRoutes(
  state: SimulatorState,
  options: SimulatorOptions,
  webhooks: WebhookSender,
  log: SimulatorLog,
) {
  const keepSends = options.keepSends ?? DEFAULT_KEEP_SENDS;
  return new Elysia()
    .onError(({ code, error }) => {
      if (error instanceof GraphError) return graphErrorResponse(error.graphCode, error.details);
      if (code === "VALIDATION") {
        return graphErrorResponse(100, describeValidation(error, graphParameterPath));
      }
      if (code === "PARSE") return graphErrorResponse(100, "The request body could not be parsed.");
      log(`unexpected error: ${describeFailure(error)}`);
      return graphErrorResponse(1);
    })
    .onTransform(({ headers }) => {
      // A transform hook runs before validation: like Graph, a request without a token fails on that first.
      requireBearer(headers.authorization);
    })
    .post(
      "/:version/:phoneNumberId/messages",
      async ({ params, body }) => {
        const { address, summary } = checkSend(body, params.phoneNumberId, state.uploads);
        const user =
          "waId" in address ? userByPhone(state, address.waId) : userByUserId(state, address.userId);
        // How logs name the recipient: as the send did.
        const waId = "waId" in address ? address.waId : address.userId;
        // Received now, whenever it is answered.
        const receivedAt = new Date().toISOString();
        // A slow answer: the send is accepted even if the caller gives up (or dies) meanwhile.
        const delay = state.pendingDelays.shift();
        if (delay !== undefined) await sleep(delay);
        if (!takeThroughput(state, params.phoneNumberId)) {
          log(`send to ${waId} from ${params.phoneNumberId} refused: over ${state.mps} messages per second`);
          throw new GraphError(130429);
        }
        const failure = state.pendingFailures.shift();
        if (failure !== undefined) {
          log(`send to ${waId} failed with injected error ${failure}`);
          throw new GraphError(failure, "Simulated failure requested with POST /_sim/fail-next.");
        }
        const sandbox = user.phone === null ? undefined : sandboxBehaviour(user.phone);
        if (sandbox?.kind === "fail") {
          log(`send to sandbox recipient ${waId} failed with ${sandbox.graphCode}`);
          throw new GraphError(
            sandbox.graphCode,
            `Sandbox recipient +${user.phone} fails every send this way.`,
          );
        }
        const wamid = newWamid();
        state.sent.push({
          id: wamid,
          phone_number_id: params.phoneNumberId,
          payload: body,
          ...("userId" in address ? { recipient: address.userId } : {}),
          received_at: receivedAt,
        });
        rememberUser(state, user);
        const recipient = wireUserOf(user);
        state.accepted.set(wamid, { phoneNumberId: params.phoneNumberId, recipient });
        forgetOldSends(state, keepSends);
        log(`accepted ${summary} to ${waId} from ${params.phoneNumberId} as ${wamid}`);
        webhooks.scheduleStatuses(
          params.phoneNumberId,
          wamid,
          recipient,
          body.biz_opaque_callback_data,
          sandbox,
        );
        return {
          messaging_product: "whatsapp",
          // Graph echoes what it was given and names the user; the phone only when shared.
          contacts: [
            "waId" in address
              ? { input: body.to, wa_id: address.waId }
              : {
                  input: body.recipient,
                  ...(recipient.phoneShared && recipient.phone ? { wa_id: recipient.phone } : {}),
                  user_id: recipient.userId,
                },
          ],
          // Graph marks template sends as accepted in the answer.
          messages: [body.type === "template" ? { id: wamid, message_status: "accepted" } : { id: wamid }],
        };
      },
      { params: t.Object({ ...GraphVersionParams, phoneNumberId: t.String() }), body: SendBody },
    )
    .post(
      "/:version/:phoneNumberId/media",
      ({ params, body }) => {
        const limit = UPLOAD_LIMITS[body.type];
        if (limit === undefined) {
          throw new GraphError(100, `Param type must be one of ${Object.keys(UPLOAD_LIMITS).join(", ")}.`);
        }
        if (body.file.size > limit) {
          throw new GraphError(
            131053,
            `The file is ${body.file.size} bytes; ${body.type} allows ${limit} bytes.`,
          );
        }
        const id = newNumericId();
        state.uploads.set(id, params.phoneNumberId);
        log(`stored upload ${id} (${body.type}, ${body.file.size} bytes) for ${params.phoneNumberId}`);
        return { id };
      },
      { params: t.Object({ ...GraphVersionParams, phoneNumberId: t.String() }), body: UploadBody },
    )
    .get(
      // Graph's paths are /{version}/{node-id}/{edge}: every GET names its node :nodeId (here the
      // business account), as the router wants one name per position (GET /{version}/{media-id}).
      "/:version/:nodeId/message_templates",
      ({ query, request }) => {
        const limit = query.limit === undefined ? DEFAULT_TEMPLATE_PAGE_SIZE : Number(query.limit);
        if (!Number.isInteger(limit) || limit < 1) {
          throw new GraphError(100, "Param limit must be a positive integer.");
        }
        const start = query.after === undefined ? 0 : decodeCursor(query.after) + 1;
        const data = TEMPLATE_CATALOGUE.slice(start, start + limit);
        if (data.length === 0) return { data };
        const end = start + data.length - 1;
        const paging: { cursors: { before: string; after: string }; next?: string } = {
          cursors: { before: encodeCursor(start), after: encodeCursor(end) },
        };
        if (end < TEMPLATE_CATALOGUE.length - 1) {
          const next = new URL(request.url);
          next.searchParams.set("after", paging.cursors.after);
          paging.next = next.toString();
        }
        return { data, paging };
      },
      {
        params: t.Object({ ...GraphVersionParams, nodeId: t.String() }),
        // `fields` and anything else Graph takes are accepted and ignored: every field is returned.
        query: openObject({ limit: t.Optional(t.String()), after: t.Optional(t.String()) }),
      },
    );
}

// Retrieving received media (Graph: GET /{version}/{media-id}, then GET its url with the token).
// Its own instance: GET /{a}/{b} would otherwise also answer unknown two-segment paths, /_sim/x.
export function graphMediaRoutes(state: SimulatorState, log: SimulatorLog) {
  return new Elysia()
    .onError(({ error }) => {
      if (error instanceof GraphError) return graphErrorResponse(error.graphCode, error.details);
      log(`unexpected error: ${describeFailure(error)}`);
      return graphErrorResponse(1);
    })
    .get(MEDIA_DOWNLOAD_PATH, ({ query, headers }) => {
      requireBearer(headers.authorization);
      const media = storedMedia(state, typeof query.mid === "string" ? query.mid : "");
      return new Response(media.bytes, {
        headers: {
          "content-type": media.mimeType,
          "content-length": String(media.bytes.byteLength),
        },
      });
    })
    .get("/:version/:nodeId", ({ params, headers, request }) => {
      if (!/^v[0-9]+\.[0-9]+$/.test(params.version)) return unknownPathResponse(request);
      requireBearer(headers.authorization);
      const mediaId = params.nodeId;
      const media = storedMedia(state, mediaId);
      const url = new URL(MEDIA_DOWNLOAD_PATH, request.url);
      url.searchParams.set("mid", mediaId);
      return {
        messaging_product: "whatsapp",
        url: url.toString(),
        mime_type: media.mimeType,
        sha256: media.sha256,
        file_size: media.bytes.byteLength,
        id: mediaId,
      };
    });
}
