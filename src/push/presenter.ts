import { epochSeconds } from "../clock.ts";
import { EVENT_TYPES } from "../events/schemas.ts";
import type { DeliveryCounts, EndpointRow } from "./repository.ts";

/** A WebhookEndpoint (DESIGN §12): `cursor` is the endpoint's position as an `evc_` cursor. */
export function presentEndpoint(
  row: EndpointRow,
  counts: DeliveryCounts | undefined,
  cursor: string,
  now: Date,
) {
  const oldest = counts?.oldest_pending_at ?? null;
  return {
    object: "webhook_endpoint" as const,
    id: row.id,
    url: row.url,
    // Every type (stored as null): today's types listed, and the flag that says later ones come too.
    events: row.events ?? [...EVENT_TYPES],
    all_events: row.events === null,
    description: row.description,
    status: row.status,
    disabled_reason: row.status === "disabled" ? row.disabled_reason : null,
    created: epochSeconds(row.created_at),
    delivery: {
      cursor,
      pending: counts?.pending ?? 0,
      oldest_pending_age: oldest ? Math.max(0, Math.floor((now.getTime() - oldest.getTime()) / 1000)) : null,
      last_success_at: row.last_success_at ? epochSeconds(row.last_success_at) : null,
      last_failure: row.last_failure_at
        ? {
            at: epochSeconds(row.last_failure_at),
            status_code: row.last_failure_status,
            error: row.last_failure_error ?? "",
          }
        : null,
    },
  };
}
