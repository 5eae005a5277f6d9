import type { Static } from "elysia";
import { epochSeconds } from "../clock.ts";
import type { MediaRow } from "./repository.ts";
import type { MediaObject } from "./schemas.ts";

/** The Media object of SPEC §2, plus `expires_at` (DESIGN §3). */
export function presentMedia(media: MediaRow): Static<typeof MediaObject> {
  return {
    object: "media",
    id: media.id,
    type: media.type,
    filename: media.filename,
    mime_type: media.mime_type,
    created: epochSeconds(media.created_at),
    expires_at: media.expires_at.toISOString(),
  };
}
