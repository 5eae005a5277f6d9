import { isDependencyDown, serviceUnavailable } from "../http/dependency-faults.ts";
import {
  ApiError,
  apiErrorBody,
  internalError,
  loggableError,
  OAuthError,
  oauthErrorBody,
  unknownPathError,
} from "../http/errors.ts";
import { API_PREFIX, capText } from "../http/paths.ts";
import { noteRefused, type RequestState, requestState } from "../http/request-state.ts";
import { validationToApiError } from "../http/validation.ts";
import { newId } from "../ids.ts";
import type { PipelineDeps, ResponseSet } from "./pipeline-deps.ts";
import type { PolicyGate } from "./policy.ts";
import type { RouteIndex } from "./route-index.ts";

/** What the error hook is given (Elysia's `onError` context). */
interface ErrorContext {
  code: string | number;
  error: unknown;
  request: Request;
  set: ResponseSet & { status?: number | string };
  path: string;
}

/**
 * The one error renderer: whatever a request failed with becomes an error of the catalogue
 * (src/http/errors.ts), answered as the route's policy says (the API's envelope, the token
 * endpoint's OAuth error, or an HTML page); an unexpected one is logged and answered as a 500.
 */
export function errorRenderer(
  deps: PipelineDeps,
  index: RouteIndex,
  spendCallerLimit: PolicyGate["spendCallerLimit"],
) {
  return async ({ code, error, request, set, path }: ErrorContext) => {
    const state = requestState(request);
    // A send refused before its route settled it: before the answer leaves, so the client's
    // next send already sees the unit back.
    await state?.admittedSend?.refund();
    const requestId = state?.requestId ?? newId("req");
    set.headers["request-id"] = requestId;

    // Elysia wraps what a parse hook throws in a ParseError; ours is the cause.
    const cause = code === "PARSE" ? (error as { cause?: unknown }).cause : undefined;
    let failure: ApiError | OAuthError;
    if (error instanceof ApiError || error instanceof OAuthError) failure = error;
    else if (cause instanceof ApiError) failure = cause;
    else if (code === "VALIDATION" && state?.bodyProblem) failure = state.bodyProblem;
    else if (code === "VALIDATION") failure = validationToApiError(error as never);
    else if (code === "NOT_FOUND") failure = await unmatched(request, set, state, path);
    else if (isDependencyDown(error) || isDependencyDown(cause)) {
      deps.logger.warn(
        { request_id: requestId, err: errorSummary(cause ?? error) },
        "dependency unavailable",
      );
      failure = serviceUnavailable();
    } else if (code === "PARSE")
      failure = new ApiError("parameter_invalid", "The request body could not be parsed.");
    else {
      // A summary, capped: an error's message may carry request data of any size.
      deps.logger.error(
        { request_id: requestId, error: loggableError(error), path: capText(path) },
        "unhandled error",
      );
      failure = internalError();
    }

    const errors = state?.policy?.errors;
    if (errors === "oauth" && failure instanceof ApiError) failure = toOAuthError(failure);
    if (state) state.status = failure.status;
    noteRefused(request, failure.status);
    const pages = deps.pageErrors;
    if (
      pages &&
      (errors === "page" ||
        (!state?.policy && (path === pages.prefix || path.startsWith(`${pages.prefix}/`))))
    )
      return pages.render(failure, requestId);
    set.status = failure.status;
    Object.assign(set.headers, failure.headers);
    if (failure instanceof OAuthError) {
      set.headers["cache-control"] = "no-store";
      return oauthErrorBody(failure, requestId);
    }
    return apiErrorBody(failure, requestId, deps.publicBaseUrl);
  };

  /**
   * A request no route matched: under the API prefix it spends the caller's read limit like any API
   * call (a 429 or 503 from that wins; outside it there is no caller to charge), then answers 405
   * with Allow when the path takes other methods, else 404.
   */
  async function unmatched(
    request: Request,
    set: ResponseSet,
    state: RequestState | undefined,
    path: string,
  ): Promise<ApiError> {
    if (state && (path === API_PREFIX || path.startsWith(`${API_PREFIX}/`))) {
      try {
        await spendCallerLimit(request, set, state, "read");
      } catch (error) {
        if (error instanceof ApiError) return error;
        throw error;
      }
    }
    const allowed = index.allowedMethods(path);
    return allowed.length > 0 && !allowed.includes(request.method)
      ? new ApiError("method_not_allowed", `${request.method} is not allowed on ${path}.`, {
          headers: { allow: allowed.join(", ") },
        })
      : unknownPathError(request.method, path);
  }
}

function toOAuthError(error: ApiError): OAuthError {
  if (error.code === "rate_limit_exceeded")
    return new OAuthError("rate_limit_exceeded", error.message, error.headers);
  // Keep the status: a dependency outage stays a 503 with Retry-After, not a 500.
  if (error.status >= 500) return new OAuthError("server_error", error.message, error.headers, error.status);
  // Keeps 405/413 honest while speaking the token endpoint's error shape.
  return new OAuthError("invalid_request", error.message, error.headers, error.status);
}

function errorSummary(error: unknown): string {
  return capText(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
}
