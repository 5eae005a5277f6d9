import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { readWith } from "../db/read-replica.ts";
import { POLICIES, routePolicy } from "../http/route-policy.ts";
import { standardErrors } from "../http/schemas.ts";
import { scopeGuard } from "../http/scope.ts";
import { presentContact } from "./presenter.ts";
import { ContactIdParams, ContactPhoneQuery, ContactSchema } from "./schemas.ts";
import { getContact, getContactByPhone } from "./service.ts";

export function contactRoutes(deps: AppDeps) {
  return new Elysia()
    .use(routePolicy)
    .use(scopeGuard)
    .get(
      "/contacts/:contact_id",
      async ({ auth, params }) => {
        const { contact, messaging } = await readWith(deps, auth, (db) =>
          getContact({ db, clock: deps.clock }, auth.tenantId, params.contact_id),
        );
        return presentContact(contact, messaging);
      },
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
      async ({ auth, query }) => {
        const { contact, messaging } = await readWith(deps, auth, (db) =>
          getContactByPhone({ db, clock: deps.clock }, auth.tenantId, query.phone),
        );
        return presentContact(contact, messaging);
      },
      {
        policy: POLICIES.apiRead,
        scope: "messaging:read",
        query: ContactPhoneQuery,
        response: {
          200: ContactSchema,
          ...standardErrors(
            "parameter_missing",
            "parameter_invalid",
            "parameter_unknown",
            "resource_missing",
          ),
        },
        detail: {
          operationId: "findContactByPhone",
          summary: "Find a contact by phone number",
          description:
            "The contact with this phone number (E.164; spaces and a missing `+` are tolerated), as a single Contact object, not a list. 404 when there is none.",
          tags: ["Contacts"],
        },
      },
    );
}
