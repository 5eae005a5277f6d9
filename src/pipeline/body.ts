import { mediaType, parseBodyBytes, readBodyCapped } from "../http/body.ts";
import { ApiError } from "../http/errors.ts";
import type { RequestState } from "../http/request-state.ts";
import { bodyValidationProblem } from "../http/validation.ts";
import type { RouteIndex } from "./route-index.ts";

/**
 * The one body reader (src/http/body.ts), once the route's policy is applied: the body read within
 * its cap and parsed, as the parse hook answers (null: no body for Elysia; undefined: Elysia's own
 * parser). A body that cannot be read is recorded, not thrown: the caller's credentials are judged
 * first (the scope guard raises it after authorizing), so a bad token is a 401 whatever the body.
 */
export async function readBody(request: Request, state: RequestState | undefined): Promise<unknown> {
  const policy = state?.bodyPolicy;
  if (!state || !policy) return null;
  const type = mediaType(request.headers.get("content-type"));
  try {
    // POST /media reads its multipart body itself, with the same cap (src/media/routes.ts).
    if (policy.kind === "media" && type === "multipart/form-data") return;
    if (type === "multipart/form-data") {
      throw new ApiError("invalid_content_type", "multipart/form-data is accepted only by POST /media.");
    }
    const bytes = await readBodyCapped(request, policy);
    state.rawBody = bytes;
    // The webhook authenticates the raw bytes before anything parses them (webhooks/routes.ts).
    if (policy.kind === "webhook") return null;
    state.parsedBody = true;
    return parseBodyBytes(type, bytes);
  } catch (error) {
    // Outside the API (panel, ops) there are no credentials to judge first: refuse at once.
    if (!(error instanceof ApiError) || policy.kind === "form") throw error;
    state.bodyProblem = error;
    return null;
  }
}

/**
 * The route's body schema, checked before Elysia's validator, whose error message serializes the
 * whole value (src/http/validation.ts). The problem is recorded like a parse problem; true when the
 * body must be emptied, so that the validator sees an empty one, cheap to refuse.
 */
export function bodyRefused(
  request: Request,
  route: string,
  body: unknown,
  state: RequestState | undefined,
  index: RouteIndex,
): boolean {
  if (!state?.parsedBody || state.bodyProblem || body == null) return false;
  const schema = index.bodySchemaOf(request.method, route);
  if (!schema) return false;
  const problem = bodyValidationProblem(schema, body);
  if (!problem) return false;
  state.bodyProblem = problem;
  return true;
}
