import { GraphError } from "./errors.ts";
import { newNumericId } from "./ids.ts";
import { SAMPLE_MEDIA } from "./sample-media.ts";
import type { SimulatorState, StoredMedia } from "./state.ts";

/** The store of received media: keeping a file, within the bounds below, and finding it by id. */

/** Inbound media the simulator keeps to serve (the newest; older ones answer like expired media). */
const MEDIA_KEPT = 1000;
const MEDIA_KEPT_BYTES = 64 * 1024 * 1024;

const SAMPLE_BYTES = new Set<Uint8Array>(Object.values(SAMPLE_MEDIA).map((media) => media.bytes));

function isSample(media: StoredMedia): boolean {
  return SAMPLE_BYTES.has(media.bytes);
}

/** Keeps a received file and answers its new media id. */
export function keepMedia(state: SimulatorState, media: StoredMedia): string {
  const id = newNumericId();
  state.inboundMedia.set(id, media);
  // The sample files are shared, so only given files count against the byte budget.
  if (!isSample(media)) state.inboundMediaBytes += media.bytes.byteLength;
  for (const [oldId, old] of state.inboundMedia) {
    if (state.inboundMedia.size <= MEDIA_KEPT && state.inboundMediaBytes <= MEDIA_KEPT_BYTES) break;
    if (oldId === id) break;
    state.inboundMedia.delete(oldId);
    if (!isSample(old)) state.inboundMediaBytes -= old.bytes.byteLength;
  }
  return id;
}

/** A stored inbound media by id, or the error Graph gives for an id it does not know (or no longer). */
export function storedMedia(state: SimulatorState, mediaId: string): StoredMedia {
  const media = state.inboundMedia.get(mediaId);
  if (!media) {
    throw new GraphError(
      100,
      `Unsupported get request. Object with ID '${mediaId}' does not exist, cannot be loaded due to missing permissions, or does not support this operation.`,
    );
  }
  return media;
}
