import type { ApiError, OAuthError } from "../http/errors.ts";
import { errorPage } from "./layout.ts";
import { htmlResponse } from "./web.ts";

const TITLES: Record<number, string> = {
  404: "Page not found",
  405: "Not allowed here",
  413: "Too large",
  503: "Briefly unavailable",
};

/** The pipeline's error renderer for /panel: the same failure, as a page a person can act on. */
export function panelErrorResponse(failure: ApiError | OAuthError, requestId: string): Response {
  const title =
    TITLES[failure.status] ?? (failure.status >= 500 ? "Something went wrong" : "Request refused");
  const message =
    failure.status === 404
      ? "There is nothing at this address, or it belongs to another account."
      : failure.status >= 500 && failure.status !== 503
        ? "An internal error occurred. It has been logged; please try again."
        : failure.message;
  return htmlResponse(errorPage(failure.status, title, message, requestId), {
    status: failure.status,
    headers: { "request-id": requestId, ...failure.headers },
  });
}
