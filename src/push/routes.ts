import type { AppDeps } from "../app-deps.ts";
import { listEnvelope } from "../http/lists.ts";
import { pathOf } from "../http/paths.ts";
import { POLICIES } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import {
  CreateEndpointBody,
  DeletedEndpointSchema,
  EndpointIdParams,
  ReplayBody,
  RotateSecretBody,
  UpdateEndpointBody,
  WebhookEndpointList,
  WebhookEndpointSchema,
  WebhookEndpointWithSecretSchema,
} from "./schemas.ts";
import {
  changeWebhookEndpoint,
  createWebhookEndpoint,
  deleteWebhookEndpoint,
  endpointDeps,
  getWebhookEndpoint,
  listWebhookEndpoints,
  replayWebhookEndpoint,
  rotateWebhookSecret,
} from "./service.ts";

const TAGS = ["Webhooks"];
const BODY_ERRORS = ["parameter_invalid", "parameter_unknown", "parameter_missing", "invalid_json"] as const;

/** /webhook_endpoints (DESIGN §12): where the event log is pushed, and how far delivery has come. */
export function webhookEndpointRoutes(deps: AppDeps) {
  const endpoints = endpointDeps(deps);
  return apiRoutes()
    .post(
      "/webhook_endpoints",
      async ({ auth, body, set }) => {
        set.status = 201;
        return createWebhookEndpoint(endpoints, auth.tenantId, body);
      },
      {
        policy: POLICIES.apiRead,
        scope: "webhooks:manage",
        body: CreateEndpointBody,
        response: {
          201: WebhookEndpointWithSecretSchema,
          ...standardErrors(...BODY_ERRORS, "resource_limit_reached"),
        },
        detail: {
          operationId: "createWebhookEndpoint",
          summary: "Create a webhook endpoint",
          description:
            "Events are posted to `url` from now on (the endpoint starts at the head of the event log; `replay` reaches back), signed per Standard Webhooks with the `secret` returned here, and only here and on `rotate_secret`: store it. In order per contact, at least once (de-duplicate by `webhook-id`); a delivery not acknowledged by a 2xx within 10 s is retried with backoff for 3 days. At most 16 endpoints per account.",
          tags: TAGS,
        },
      },
    )
    .get(
      "/webhook_endpoints",
      async ({ auth, request }) =>
        listEnvelope(pathOf(request.url), await listWebhookEndpoints(endpoints, auth.tenantId)),
      {
        policy: POLICIES.apiRead,
        scope: "messaging:read",
        response: { 200: WebhookEndpointList, ...standardErrors() },
        detail: {
          operationId: "listWebhookEndpoints",
          summary: "List webhook endpoints",
          description: "Every webhook endpoint of your account, with where its delivery stands.",
          tags: TAGS,
        },
      },
    )
    .get(
      "/webhook_endpoints/:endpoint_id",
      ({ auth, params }) => getWebhookEndpoint(endpoints, auth.tenantId, params.endpoint_id),
      {
        policy: POLICIES.apiRead,
        scope: "messaging:read",
        params: EndpointIdParams,
        response: { 200: WebhookEndpointSchema, ...standardErrors("parameter_invalid", "resource_missing") },
        detail: {
          operationId: "getWebhookEndpoint",
          summary: "Get a webhook endpoint",
          description:
            "One endpoint: its state, and its delivery: the cursor everything before which was acknowledged, the events pending and the age of the oldest, the last success and the last failure.",
          tags: TAGS,
        },
      },
    )
    .patch(
      "/webhook_endpoints/:endpoint_id",
      ({ auth, params, body }) => changeWebhookEndpoint(endpoints, auth.tenantId, params.endpoint_id, body),
      {
        policy: POLICIES.apiRead,
        scope: "webhooks:manage",
        params: EndpointIdParams,
        body: UpdateEndpointBody,
        response: { 200: WebhookEndpointSchema, ...standardErrors(...BODY_ERRORS, "resource_missing") },
        detail: {
          operationId: "updateWebhookEndpoint",
          summary: "Update a webhook endpoint",
          description:
            "Change the url, the event types or the description, or disable and enable the endpoint. Enabled again, it resumes from its cursor, so nothing that happened meanwhile is missed.",
          tags: TAGS,
        },
      },
    )
    .delete(
      "/webhook_endpoints/:endpoint_id",
      ({ auth, params }) => deleteWebhookEndpoint(endpoints, auth.tenantId, params.endpoint_id),
      {
        policy: POLICIES.apiRead,
        scope: "webhooks:manage",
        params: EndpointIdParams,
        response: { 200: DeletedEndpointSchema, ...standardErrors("parameter_invalid", "resource_missing") },
        detail: {
          operationId: "deleteWebhookEndpoint",
          summary: "Delete a webhook endpoint",
          description: "Nothing more is posted to it.",
          tags: TAGS,
        },
      },
    )
    .post(
      "/webhook_endpoints/:endpoint_id/rotate_secret",
      ({ auth, params, body }) =>
        rotateWebhookSecret(endpoints, auth.tenantId, params.endpoint_id, body?.expire_previous_in),
      {
        policy: POLICIES.apiRead,
        scope: "webhooks:manage",
        params: EndpointIdParams,
        body: RotateSecretBody,
        response: {
          200: WebhookEndpointWithSecretSchema,
          ...standardErrors(...BODY_ERRORS, "resource_missing"),
        },
        detail: {
          operationId: "rotateWebhookEndpointSecret",
          summary: "Rotate an endpoint's secret",
          description:
            "A new `secret`, returned only here. The replaced secret keeps signing for `expire_previous_in` seconds (24 hours by default; 0 ends it now, e.g. after a leak): meanwhile every delivery carries two signatures, one by each secret, so your receiver can switch to the new one without a gap. At most two secrets sign at once: rotating again ends the older previous secret at once.",
          tags: TAGS,
        },
      },
    )
    .post(
      "/webhook_endpoints/:endpoint_id/replay",
      ({ auth, params, body }) =>
        replayWebhookEndpoint(endpoints, auth.tenantId, params.endpoint_id, body.since),
      {
        policy: POLICIES.apiRead,
        scope: "webhooks:manage",
        params: EndpointIdParams,
        body: ReplayBody,
        response: { 200: WebhookEndpointSchema, ...standardErrors(...BODY_ERRORS, "resource_missing") },
        detail: {
          operationId: "replayWebhookEndpoint",
          summary: "Replay events to an endpoint",
          description:
            "Delivery starts over with the events after `since` (an `evc_` cursor, e.g. a `next_cursor` of GET /events or an earlier `delivery.cursor`; `null` = the oldest event kept, 30 days): each is posted again, in order per contact, whether or not it was acknowledged before.",
          tags: TAGS,
        },
      },
    );
}
