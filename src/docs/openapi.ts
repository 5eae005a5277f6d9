import { SCOPE_MEANINGS } from "../http/request-state.ts";
import { POLICY_DETAIL_KEY } from "../http/route-policy.ts";
import { ErrorResponse, OAuthErrorResponse } from "../http/schemas.ts";
import { HEADERS, responsesOf } from "./openapi-responses.ts";
import { Components, type Json } from "./openapi-schema.ts";
import { DESCRIPTION, LICENSE, TAGS } from "./openapi-texts.ts";
import { buildWebhooks, WEBHOOK_PARAMETERS } from "./openapi-webhooks.ts";

/**
 * `{base_url}/openapi.json`, built from the routes the app serves: their TypeBox schemas (the ones that
 * validate requests and responses), their `detail` (an OpenAPI operation: summary, tags, security,
 * extra parameters, and request/response skeletons whose schemas are filled in here), and the error
 * catalogue (src/http/errors.ts) for every error response they declare. The schemas are turned into
 * OpenAPI 3.1 JSON Schema, titled ones into components, by src/docs/openapi-schema.ts. Here: the
 * document and its operations; their answers are openapi-responses.ts's, the `webhooks` entries
 * openapi-webhooks.ts's, and the prose (tags, description) openapi-texts.ts's.
 */

/** What the generator reads of an Elysia route (`app.routes`). */
export interface DocumentedRoute {
  method: string;
  path: string;
  hooks?: unknown;
}

interface RouteHooks {
  body?: unknown;
  query?: unknown;
  params?: unknown;
  headers?: unknown;
  response?: unknown;
  detail?: Json & { hide?: boolean };
}

export interface DocumentOptions {
  /** `{base_url}`, the server URL; operations are documented relative to it. */
  baseUrl: string;
  /** The route path prefix that `baseUrl` stands for (`/v2`). */
  prefix: string;
  version: string;
}

const OPENAPI_VERSION = "3.1.0";

export function buildOpenApiDocument(routes: readonly DocumentedRoute[], options: DocumentOptions): Json {
  const schemas = new Components();
  const paths: Record<string, Json> = {};
  const operationIds = new Set<string>();

  for (const route of routes) {
    const hooks = (route.hooks ?? {}) as RouteHooks;
    if (!route.path.startsWith(`${options.prefix}/`) || hooks.detail?.hide) continue;
    const method = route.method.toLowerCase();
    if (!["get", "post", "put", "patch", "delete"].includes(method)) continue;
    const path = route.path.slice(options.prefix.length).replace(/:([^/]+)/g, "{$1}");
    const operation = buildOperation(route, hooks, schemas, options);
    const operationId = operation.operationId as string;
    if (operationIds.has(operationId)) throw new Error(`duplicate operationId ${operationId}`);
    operationIds.add(operationId);
    paths[path] = { ...paths[path], [method]: operation };
  }
  const webhooks = buildWebhooks(schemas);
  // The envelopes are referenced by every error response; make sure they are there.
  schemas.add(ErrorResponse);
  schemas.add(OAuthErrorResponse);

  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: "Messaging Notification API",
      version: options.version,
      description: DESCRIPTION,
      contact: { name: "API support", url: `${options.baseUrl}/docs` },
      license: LICENSE,
    },
    servers: [{ url: options.baseUrl, description: "This service." }],
    externalDocs: { description: "Error codes", url: `${options.baseUrl}/docs` },
    tags: TAGS,
    paths,
    webhooks,
    components: {
      schemas: schemas.sorted(),
      parameters: WEBHOOK_PARAMETERS,
      headers: HEADERS,
      // One scheme, so the reference's Authorize dialog offers one way in: the client credentials
      // flow, whose token is sent as `Authorization: Bearer <token>`.
      securitySchemes: {
        oauth2: {
          type: "oauth2",
          description:
            "OAuth 2.0 client credentials: your application's `client_id` and `client_secret` (HTTP Basic or form fields) at `POST /oauth/token` give an access token (a JWT), sent as `Authorization: Bearer <token>`. In this reference: Authorize, enter both, and every request you try carries the token.",
          flows: {
            clientCredentials: {
              tokenUrl: `${options.baseUrl}/oauth/token`,
              scopes: { ...SCOPE_MEANINGS },
            },
          },
        },
      },
    },
  };
}

function buildOperation(
  route: DocumentedRoute,
  hooks: RouteHooks,
  schemas: Components,
  options: DocumentOptions,
): Json {
  const {
    hide: _hide,
    parameters: extraParameters,
    requestBody: bodySkeleton,
    responses: responseSkeletons,
    // The pipeline's (src/http/route-policy.ts); the document says it in words.
    [POLICY_DETAIL_KEY]: _policy,
    ...detail
  } = hooks.detail ?? {};
  if (typeof detail.operationId !== "string") {
    throw new Error(`${route.method} ${route.path} has no detail.operationId`);
  }
  const operation: Json = { ...detail };
  const scope = detail["x-scope"];
  if (typeof scope === "string") {
    operation.description = [detail.description, `Requires the scope \`${scope}\`.`]
      .filter(Boolean)
      .join("\n\n");
  }

  const parameters = [
    ...parametersOf(hooks.params, "path", schemas),
    ...parametersOf(hooks.query, "query", schemas),
    ...parametersOf(hooks.headers, "header", schemas),
    ...((extraParameters as Json[] | undefined) ?? []),
  ];
  if (!hooks.params && route.path.includes(":")) {
    throw new Error(`${route.method} ${route.path} has path parameters but no params schema`);
  }
  if (parameters.length > 0) operation.parameters = parameters;

  const method = route.method.toUpperCase();
  if (hooks.body && method !== "GET" && method !== "HEAD") {
    operation.requestBody = requestBodyOf(hooks, (bodySkeleton ?? {}) as Json, schemas);
  }
  operation.responses = responsesOf(
    hooks.response,
    (responseSkeletons ?? {}) as Json,
    schemas,
    options.baseUrl,
  );
  return operation;
}

function parametersOf(schema: unknown, where: "path" | "query" | "header", schemas: Components): Json[] {
  if (!schema) return [];
  const object = schemas.inline(schema);
  const properties = (object.properties ?? {}) as Record<string, Json>;
  const required = new Set((object.required as string[] | undefined) ?? []);
  return Object.entries(properties).map(([name, property]) => {
    const { description, ...rest } = property;
    return {
      name,
      in: where,
      required: where === "path" || required.has(name),
      ...(typeof description === "string" && { description }),
      schema: rest,
    };
  });
}

/**
 * The route's `detail.requestBody.content` names the media types it reads (JSON when it names none,
 * as for answers); the body schema fills each, or `detail.requestBody.schema`, a documented variant of
 * it (e.g. withExclusivePairs) where the validating schema cannot say everything a client should know.
 */
function requestBodyOf(hooks: RouteHooks, skeleton: Json, schemas: Components): Json {
  const { schema: documented, ...rest } = skeleton;
  const content = (rest.content as Record<string, Json> | undefined) ?? { "application/json": {} };
  const schema = schemas.toJson(documented ?? hooks.body);
  return {
    ...rest,
    required: rest.required ?? true,
    content: Object.fromEntries(Object.entries(content).map(([type, media]) => [type, { schema, ...media }])),
  };
}
