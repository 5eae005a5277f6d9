import { createHash } from "node:crypto";
import {
  buildWebhook,
  type DeliveryStatus,
  type InboundMessage,
  type StatusError,
  type WebhookAccount,
  type WireUser,
  webhookTimestamp,
  wireAuthor,
  wireContact,
  wireRecipient,
} from "../channel/webhook-payloads.ts";
import { ControlError, GRAPH_ERRORS } from "./errors.ts";
import { newWamid } from "./ids.ts";
import { keepMedia } from "./media-store.ts";
import { SAMPLE_MEDIA } from "./sample-media.ts";
import type { InboundRequest, StatusRequest } from "./schemas.ts";
import type { SimulatorState } from "./state.ts";
import { inboundAuthor, wireUserOf } from "./users.ts";

/**
 * The webhook bodies the simulator posts: a customer's message, and a status of a send. Every one
 * names the user by BSUID, and by phone only when the user shares it (DESIGN §14).
 */

// Webhooks name a business account and a display number; the simulator accepts any phone-number-id
// without knowing either, so these stand in unless a control call gives its own.
export const SIMULATOR_WABA_ID = "100000000000000";
export const SIMULATOR_DISPLAY_PHONE_NUMBER = "15550100000";

export function webhookAccount(request: {
  phoneNumberId: string;
  waba_id?: string;
  display_phone_number?: string;
}): WebhookAccount {
  return {
    wabaId: request.waba_id ?? SIMULATOR_WABA_ID,
    phoneNumberId: request.phoneNumberId,
    displayPhoneNumber: request.display_phone_number ?? SIMULATOR_DISPLAY_PHONE_NUMBER,
  };
}

export function statusUpdate(
  wamid: string,
  status: DeliveryStatus,
  recipient: WireUser,
  timestamp: string,
  errors?: StatusError[],
  callbackData?: string,
) {
  return {
    id: wamid,
    status,
    timestamp,
    ...wireRecipient(recipient),
    ...(errors ? { errors } : {}),
    ...(callbackData ? { biz_opaque_callback_data: callbackData } : {}),
  };
}

export function statusErrors(given: StatusRequest["errors"]): StatusError[] {
  // A failed status always carries an error; "undeliverable" is the common one.
  return (given ?? [{ code: 131026 }]).map((error) => {
    const known = GRAPH_ERRORS[error.code];
    const title = error.title ?? known?.title ?? "Simulated error";
    return {
      code: error.code,
      title,
      message: error.message ?? title,
      error_data: { details: error.details ?? known?.details ?? title },
    };
  });
}

function inboundMessage(state: SimulatorState, request: InboundRequest, author: WireUser): InboundMessage {
  const base = {
    ...wireAuthor(author),
    id: request.id ?? newWamid(),
    timestamp: request.timestamp === undefined ? webhookTimestamp() : String(request.timestamp),
  };
  const media = () => {
    const sample = SAMPLE_MEDIA[request.type as keyof typeof SAMPLE_MEDIA];
    const given = request.media_base64 !== undefined;
    const bytes = given ? new Uint8Array(Buffer.from(request.media_base64!, "base64")) : sample.bytes;
    const mimeType = request.mime_type ?? sample.mimeType;
    const sha256 = createHash("sha256").update(bytes).digest("base64");
    return { id: keepMedia(state, { bytes, mimeType, sha256 }), mime_type: mimeType, sha256 };
  };
  const caption = request.caption === undefined ? {} : { caption: request.caption };
  switch (request.type) {
    case "text":
      if (request.text === undefined) throw new ControlError("type text needs text");
      return { ...base, type: "text", text: { body: request.text } };
    case "image":
      return { ...base, type: "image", image: { ...media(), ...caption } };
    case "video":
      return { ...base, type: "video", video: { ...media(), ...caption } };
    case "audio":
      return { ...base, type: "audio", audio: { ...media(), voice: true } };
    case "document": {
      const filename = request.filename === undefined ? {} : { filename: request.filename };
      return { ...base, type: "document", document: { ...media(), ...caption, ...filename } };
    }
    case "system": {
      const newWaId = request.new_wa_id === undefined ? {} : { new_wa_id: request.new_wa_id };
      const body = request.text ?? `${request.name ?? "The customer"} changed their phone number.`;
      return { ...base, type: "system", system: { body, type: "customer_changed_number", ...newWaId } };
    }
  }
}

/** The signed inbound-message webhook of a customer's message (POST /_sim/inbound, sandbox replies). */
export function inboundWebhook(state: SimulatorState, request: InboundRequest) {
  const user = inboundAuthor(state, request);
  const author = wireUserOf(user, request.name ?? "Sim Customer");
  const message = inboundMessage(state, request, author);
  // The provider sends no contact profile with system messages.
  const contacts = request.type === "system" ? {} : { contacts: [wireContact(author)] };
  const webhook = buildWebhook(webhookAccount({ ...request, phoneNumberId: request.phone_number_id }), {
    ...contacts,
    messages: [message],
  });
  return { webhook, message, author: user.phone === null ? user.userId : `+${user.phone}` };
}
