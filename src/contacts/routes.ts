import type { AppDeps } from "../app-deps.ts";
import { readWith } from "../db/read-replica.ts";
import { POLICIES } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { apiRoutes } from "../http/scope.ts";
import type { OptOutChange } from "./opt-out.ts";
import { presentContact } from "./presenter.ts";
import { ContactIdParams, ContactLookupQuery, ContactSchema } from "./schemas.ts";
import { findContactBy, getContact, setContactOptOut } from "./service.ts";

/** POST /contacts/{id}/opt_out and /opt_in: what each does, for the OpenAPI document. */
const OPT_OUT_ROUTES: Record<
  OptOutChange,
  { path: string; operationId: string; summary: string; description: string }
> = {
  opt_out: {
    path: "/contacts/:contact_id/opt_out",
    operationId: "optOutContact",
    summary: "Opt a contact out",
    description:
      "Nothing is sent to this contact from now on: a send to them is refused with 409 `recipient_opted_out`, and a message accepted but not yet handed to the provider fails with `failure.code` `recipient_opted_out`. The same happens when the customer answers STOP, STOPALL, UNSUBSCRIBE, CANCEL, END or QUIT, or when the provider reports 131050. Idempotent: a contact already opted out stays so. No body. Returns the Contact, `messaging.opted_out` true.",
  },
  opt_in: {
    path: "/contacts/:contact_id/opt_in",
    operationId: "optInContact",
    summary: "Opt a contact back in",
    description:
      "The contact may be messaged again (the 24-hour window still decides between free text and templates). Only with the customer's consent; a customer who answers START or UNSTOP opts back in by themselves. Idempotent. No body. Returns the Contact, `messaging.opted_out` false.",
  },
};

export function contactRoutes(deps: AppDeps) {
  return apiRoutes()
    .get(
      "/contacts/:contact_id",
      async ({ auth, params }) =>
        presentContact(
          await readWith(deps, auth, (db) =>
            getContact({ db, clock: deps.clock }, auth.tenantId, params.contact_id),
          ),
        ),
      {
        policy: POLICIES.apiRead,
        scope: "messaging:read",
        params: ContactIdParams,
        response: { 200: ContactSchema, ...standardErrors("parameter_invalid", "resource_missing") },
        detail: {
          operationId: "retrieveContact",
          summary: "Retrieve a contact",
          description:
            "One contact with its `messaging` state: whether free text may be sent now (the 24-hour window after the customer's last message, and an active sender) or only an approved template.",
          tags: ["Contacts"],
        },
      },
    )
    .get(
      "/contacts",
      async ({ auth, query }) =>
        presentContact(
          await readWith(deps, auth, (db) => findContactBy({ db, clock: deps.clock }, auth.tenantId, query)),
        ),
      {
        policy: POLICIES.apiRead,
        scope: "messaging:read",
        query: ContactLookupQuery,
        response: {
          200: ContactSchema,
          ...standardErrors(
            "parameter_missing",
            "parameter_conflict",
            "parameter_invalid",
            "parameter_unknown",
            "resource_missing",
          ),
        },
        detail: {
          operationId: "findContactByPhone",
          summary: "Find a contact by phone number or user id",
          description:
            "The contact with this phone number (`phone`, E.164; spaces and a missing `+` are tolerated) or this business-scoped user id (`user_id`: the BSUID WhatsApp names the customer by, one the customer had before, or a parent BSUID), as a single Contact object, not a list. Exactly one of `phone` and `user_id`. 404 when there is none.",
          tags: ["Contacts"],
        },
      },
    )
    .post(
      OPT_OUT_ROUTES.opt_out.path,
      async ({ auth, params }) => presentOptOut(deps, auth.tenantId, params.contact_id, "opt_out"),
      optOutOptions("opt_out"),
    )
    .post(
      OPT_OUT_ROUTES.opt_in.path,
      async ({ auth, params }) => presentOptOut(deps, auth.tenantId, params.contact_id, "opt_in"),
      optOutOptions("opt_in"),
    );
}

async function presentOptOut(deps: AppDeps, tenantId: string, contactId: string, change: OptOutChange) {
  return presentContact(
    await setContactOptOut({ db: deps.db, clock: deps.clock }, tenantId, contactId, change),
  );
}

/** The route options of opt_out and opt_in: no body (an empty one, or none, is accepted). */
function optOutOptions(change: OptOutChange) {
  const { path: _, ...detail } = OPT_OUT_ROUTES[change];
  return {
    // A change of the contact, not a send: the read limit, like the other writes that send nothing.
    policy: POLICIES.apiRead,
    scope: "messaging:send" as const,
    params: ContactIdParams,
    response: { 200: ContactSchema, ...standardErrors("parameter_invalid", "resource_missing") },
    detail: { ...detail, tags: ["Contacts"] },
  };
}
