import type { AppDeps } from "../app-deps.ts";
import { ProviderError } from "../channel/provider.ts";
import type { Db } from "../db/connect.ts";
import { ApiError } from "../http/errors.ts";
import { newId } from "../ids.ts";
import { type SenderRow, senderCredentials } from "../senders/repository.ts";
import { resolveSender } from "../senders/resolve.ts";
import { findMedia, insertMedia, type MediaRow } from "./repository.ts";
import { type MediaKind, SNIFF_BYTES, sniffMedia } from "./sniff.ts";

const MB = 1024 * 1024;
/** Per type, as the provider takes them (DESIGN §3); SPEC caps every file at 16 MB. */
const MEDIA_SIZE_LIMITS: Record<MediaKind, number> = {
  image: 5 * MB,
  video: 16 * MB,
  document: 16 * MB,
};
const MEDIA_VALIDITY_MS = 30 * 24 * 60 * 60 * 1000;
const FILENAME_MAX_LENGTH = 255;

export interface MediaUpload {
  file: File;
  sender?: string;
  filename?: string;
}

/**
 * POST /media: recognise the file, check its size, upload it to the provider for the sender, and
 * keep the handle. The file is read into memory once, after its type and size have passed.
 */
export async function uploadMedia(
  deps: Pick<AppDeps, "db" | "provider" | "clock"> & { config: Pick<AppDeps["config"], "providerTokenKey"> },
  tenantId: string,
  upload: MediaUpload,
): Promise<MediaRow> {
  const { file } = upload;
  const sniffed = sniffMedia(await file.slice(0, SNIFF_BYTES).bytes());
  if (!sniffed) {
    throw new ApiError(
      "unsupported_media_type",
      "The file is not a PDF, JPEG, PNG, MP4 or 3GPP file (judged by its content, not its name or Content-Type).",
      { param: "file" },
    );
  }
  const limit = MEDIA_SIZE_LIMITS[sniffed.type];
  if (file.size > limit) {
    throw new ApiError(
      "file_too_large",
      `The file is ${file.size} bytes; ${sniffed.type} files may be at most ${limit / MB} MB.`,
      { param: "file" },
    );
  }

  const sender = await uploadingSender(deps.db, tenantId, upload.sender);
  const filename = upload.filename ?? (sniffed.type === "document" ? partFilename(file) : null);

  let providerMediaId: string;
  try {
    ({ providerMediaId } = await deps.provider.uploadMedia(
      senderCredentials(deps.config.providerTokenKey, sender),
      { content: file, mimeType: sniffed.mimeType, filename: filename ?? undefined },
    ));
  } catch (error) {
    throw error instanceof ProviderError ? providerFailure(error) : error;
  }

  const createdAt = deps.clock.now();
  return insertMedia(deps.db, {
    id: newId("med"),
    tenant_id: tenantId,
    sender_id: sender.id,
    type: sniffed.type,
    mime_type: sniffed.mimeType,
    filename,
    size_bytes: file.size,
    provider_media_id: providerMediaId,
    created_at: createdAt,
    expires_at: new Date(createdAt.getTime() + MEDIA_VALIDITY_MS),
  });
}

/**
 * A handle the send path may use for this sender: unknown, another tenant's and another sender's
 * handles are all 404 (an upload lives at one sender's provider number and works only there), and one
 * past its 30 days is 400 `media_expired`. `param` names where the caller read the handle.
 */
export async function findUsableMedia(
  db: Db,
  tenantId: string,
  senderId: string,
  mediaId: string,
  now: Date,
  param = "template.header.media",
): Promise<MediaRow> {
  const media = await findMedia(db, tenantId, mediaId);
  if (!media || media.sender_id !== senderId) {
    throw new ApiError("resource_missing", `No such media for this sender: ${mediaId}.`, { param });
  }
  if (media.expires_at <= now) {
    throw new ApiError(
      "media_expired",
      `Media ${mediaId} expired at ${media.expires_at.toISOString()}; upload the file again with POST /media.`,
      { param },
    );
  }
  return media;
}

/** Like the send path's choice, but an upload needs a sender to upload to: none is a missing parameter. */
async function uploadingSender(db: Db, tenantId: string, senderId: string | undefined): Promise<SenderRow> {
  const sender = await resolveSender(db, tenantId, senderId);
  if (!sender) {
    throw new ApiError("parameter_missing", "This account has no active sender to upload the file for.", {
      param: "sender",
    });
  }
  if (!sender.active) {
    throw new ApiError("parameter_invalid", `Sender ${sender.id} is inactive.`, { param: "sender" });
  }
  return sender;
}

/** The name the client gave the file part, kept for documents (the recipient sees it). */
function partFilename(file: File): string | null {
  const name = file.name.trim();
  return name === "" ? null : Array.from(name).slice(0, FILENAME_MAX_LENGTH).join("");
}

function providerFailure(error: ProviderError): ApiError {
  if (error.retryable) {
    return new ApiError(
      "service_unavailable",
      "The messaging provider is briefly unavailable. Retry shortly.",
      {
        headers: { "retry-after": "5" },
      },
    );
  }
  return new ApiError("parameter_invalid", `The provider refused the file: ${error.message}`, {
    param: "file",
  });
}
