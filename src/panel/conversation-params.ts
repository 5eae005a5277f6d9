import { type IdPrefix, isId } from "../ids.ts";
import { type ListNarrowing, listFilterOf, listSearchOf } from "./conversation-data.ts";

/** What the Conversations routes read from a query or a form besides its fields: ids, a page, a narrowing. */

/** A poll's conditional parameters are opaque to the client; anything else is ignored. */
export function idParam(value: string | undefined, prefix: IdPrefix): string | undefined {
  return value !== undefined && isId(value, prefix) ? value : undefined;
}

export function beforeSeconds(value: string | undefined): number | undefined {
  return /^\d{1,12}$/.test(value ?? "") ? Number(value) : undefined;
}

export function narrowingOf(query: Record<string, string | undefined>): ListNarrowing {
  return { filter: listFilterOf(query.filter), q: listSearchOf(query.q) };
}
