import { t } from "elysia";
import { EventTypeSchema } from "../events/schemas.ts";
import { listOf } from "../http/schemas.ts";
import { EXPECTED_KEY } from "../http/validation.ts";
import { PENDING_SAMPLE_ROWS } from "./repository.ts";
import { ENDPOINT_URL_MAX } from "./url-safety.ts";

/** At most this many endpoints per tenant (DESIGN §12). */
export const ENDPOINTS_PER_TENANT = 16;
export const DESCRIPTION_MAX = 500;

export const EndpointIdParams = t.Object({
  endpoint_id: t.String({ maxLength: 100, description: "a `we_` id" }),
});

const endpointUrl = t.String({
  maxLength: ENDPOINT_URL_MAX,
  description:
    "Where events are posted: `https` to a public host (a name resolving to a private, loopback or link-local address is refused).",
  "x-param": "url",
  [EXPECTED_KEY]: `an https URL of at most ${ENDPOINT_URL_MAX} characters`,
});
const endpointEvents = t.Array(EventTypeSchema, {
  minItems: 1,
  uniqueItems: true,
  description: "The event types posted to this endpoint: at least one, each once. Omit it for every type.",
  "x-param": "events",
  // An empty list is refused, not read as "none" or "all": it would say the opposite of either.
  [EXPECTED_KEY]: "a list of at least one event type, each named once; omit events to receive every type",
});
const endpointDescription = t.Nullable(
  t.String({ maxLength: DESCRIPTION_MAX, description: "Your note on what this endpoint is for." }),
  { [EXPECTED_KEY]: `a string of at most ${DESCRIPTION_MAX} characters, or null` },
);

export const CreateEndpointBody = t.Object(
  {
    url: endpointUrl,
    events: t.Optional(endpointEvents),
    description: t.Optional(endpointDescription),
  },
  { description: "`events` omitted: every type." },
);

export const UpdateEndpointBody = t.Object({
  url: t.Optional(endpointUrl),
  events: t.Optional(
    t.Nullable(endpointEvents, {
      description:
        "The event types posted to this endpoint from now on: at least one, each once. `null`: every type, including types added later.",
      "x-param": "events",
      [EXPECTED_KEY]: "a list of at least one event type, each named once, or null to receive every type",
    }),
  ),
  description: t.Optional(endpointDescription),
  status: t.Optional(
    t.Union([t.Literal("enabled"), t.Literal("disabled")], {
      description: "`enabled` resumes delivery from the endpoint's cursor; `disabled` stops it.",
    }),
  ),
});

/** The longest a replaced secret may keep signing after a rotation (DESIGN §12: 0–24 h). */
export const MAX_PREVIOUS_SECRET_SECONDS = 24 * 3600;

/** Optional: no body, or `{}`, keeps the replaced secret for 24 hours. */
export const RotateSecretBody = t.Optional(
  t.Object({
    expire_previous_in: t.Optional(
      // A JSON number (t.Integer would take "60" too), whole.
      t.Number({
        multipleOf: 1,
        minimum: 0,
        maximum: MAX_PREVIOUS_SECRET_SECONDS,
        description:
          "Seconds the replaced secret keeps signing, alongside the new one (default 86400, 24 hours). 0: it stops now (a leaked secret). A secret replaced before it stops at once either way.",
        "x-param": "expire_previous_in",
        [EXPECTED_KEY]: `a whole number of seconds from 0 to ${MAX_PREVIOUS_SECRET_SECONDS}`,
      }),
    ),
  }),
);

export const ReplayBody = t.Object({
  since: t.Nullable(
    t.String({
      description:
        "An `evc_` cursor (a `next_cursor` of GET /events, or an endpoint's `delivery.cursor`): delivery restarts with the events after it. `null`: the oldest event kept.",
      "x-param": "since",
    }),
    { [EXPECTED_KEY]: "an `evc_` cursor, or null for the oldest event kept" },
  ),
});

const DeliveryStateSchema = t.Object(
  {
    cursor: t.String({
      description:
        "`evc_` cursor: every event before it was acknowledged (or is of a type not subscribed). Pass it to GET /events to read what is pending.",
    }),
    pending: t.Integer({
      description: `Subscribed events after the cursor not yet acknowledged. Exact for an endpoint of every type (\`all_events\`); for one that lists its types, exact within the first ${PENDING_SAMPLE_ROWS.toLocaleString("en-US")} events of the log after the cursor and estimated past them (from the share of its types among those).`,
    }),
    oldest_pending_age: t.Nullable(
      t.Integer({
        description: "Seconds since the oldest pending event happened; null when none is pending.",
      }),
    ),
    last_success_at: t.Nullable(
      t.Integer({ description: "Unix seconds of the last acknowledged delivery." }),
    ),
    last_failure: t.Nullable(
      t.Object({
        at: t.Integer({ description: "Unix seconds." }),
        status_code: t.Nullable(
          t.Integer({ description: "The receiver's HTTP status; null when none came." }),
        ),
        error: t.String({ description: "What went wrong, with a short excerpt of the receiver's answer." }),
      }),
    ),
  },
  { description: "Where delivery stands." },
);

const endpointFields = {
  object: t.Literal("webhook_endpoint"),
  id: t.String({ description: "`we_` id." }),
  url: t.String(),
  events: t.Array(EventTypeSchema, {
    description:
      "The event types posted to this endpoint. For an endpoint of every type (`all_events`), every type there is now.",
  }),
  all_events: t.Boolean({
    description:
      "True: the endpoint receives every type, including types added later (created without `events`, or PATCHed with `events: null`). False: only the types in `events`.",
  }),
  description: t.Nullable(t.String()),
  status: t.Union([t.Literal("enabled"), t.Literal("disabled")]),
  disabled_reason: t.Nullable(
    t.String({
      description:
        "Why delivery stopped by itself: `failing` (an event could not be delivered for 3 days) or `gone` (the receiver answered 410). Null when enabled or disabled by you.",
    }),
  ),
  created: t.Integer({ description: "Unix seconds." }),
  delivery: DeliveryStateSchema,
};

export const WebhookEndpointSchema = t.Object(endpointFields, {
  title: "WebhookEndpoint",
  description: "Where events are pushed, signed per Standard Webhooks, and how far delivery has come.",
});

export const WebhookEndpointWithSecretSchema = t.Object(
  {
    ...endpointFields,
    secret: t.String({
      description:
        "`whsec_` signing secret: shown only when the endpoint is created and when its secret is rotated. Verify each delivery with it.",
    }),
  },
  { title: "WebhookEndpointWithSecret", description: "A webhook endpoint with its signing secret." },
);

export const WebhookEndpointList = listOf(WebhookEndpointSchema, "Your webhook endpoints, oldest first.");

export const DeletedEndpointSchema = t.Object(
  {
    object: t.Literal("webhook_endpoint"),
    id: t.String(),
    deleted: t.Literal(true),
  },
  { title: "DeletedWebhookEndpoint" },
);
