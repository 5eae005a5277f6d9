import { randomBytes } from "node:crypto";
import { ValueErrorType } from "@sinclair/typebox/errors";

/**
 * How the simulator answers what went wrong: Graph's error table and shape for the Graph routes, a
 * plain `{error: {message}}` for the control API, validation messages, and paths nothing serves.
 */
// Graph errors the simulator answers with: HTTP status, the message's title, the usual details.
export const GRAPH_ERRORS: Record<number, { status: number; title: string; details: string }> = {
  1: { status: 500, title: "An unknown error occurred", details: "An unknown error occurred." },
  2: {
    status: 503,
    title: "Service temporarily unavailable",
    details: "The service is temporarily unavailable.",
  },
  4: {
    status: 429,
    title: "Application request limit reached",
    details: "The app has reached its API call rate limit.",
  },
  100: { status: 400, title: "Invalid parameter", details: "A parameter is missing or invalid." },
  190: { status: 401, title: "Invalid OAuth access token", details: "Cannot parse access token." },
  80007: {
    status: 429,
    title: "Rate limit issues",
    details: "The WhatsApp Business Account has reached its rate limit.",
  },
  130429: { status: 429, title: "Rate limit hit", details: "Cloud API message throughput has been reached." },
  131000: {
    status: 500,
    title: "Something went wrong",
    details: "Message failed to send because of an unknown error.",
  },
  131008: {
    status: 400,
    title: "Required parameter is missing",
    details: "A required parameter is missing.",
  },
  131009: { status: 400, title: "Parameter value is not valid", details: "A parameter value is not valid." },
  131026: {
    status: 400,
    title: "Message undeliverable",
    details: "Unable to deliver the message: the recipient may not be on WhatsApp.",
  },
  131047: {
    status: 400,
    title: "Re-engagement message",
    details: "More than 24 hours have passed since the recipient last replied to this number.",
  },
  131048: {
    status: 400,
    title: "Spam rate limit hit",
    details: "There are restrictions on how many messages can be sent from this phone number.",
  },
  131050: {
    status: 400,
    title: "Unable to deliver the message",
    details: "The user has stopped marketing messages from this business.",
  },
  131053: { status: 400, title: "Media upload error", details: "The uploaded media could not be processed." },
  131056: {
    status: 400,
    title: "(Business Account, Consumer Account) pair rate limit hit",
    details: "Too many messages from this sender to the same recipient in a short time.",
  },
  132000: {
    status: 400,
    title: "Number of parameters does not match the expected number of params",
    details: "The parameter count does not match the template.",
  },
  132001: {
    status: 400,
    title: "Template name does not exist in the translation",
    details: "The template does not exist in that language or is not approved.",
  },
  132005: {
    status: 400,
    title: "Translated text too long",
    details: "The filled-in template text is too long.",
  },
  132007: {
    status: 400,
    title: "Template format character policy violated",
    details: "The template content violates a WhatsApp policy.",
  },
  132012: {
    status: 400,
    title: "Parameter format does not match format in the created template",
    details: "A parameter's type does not match the template.",
  },
  132018: {
    status: 400,
    title: "There was an issue with the parameters in your template.",
    details: "Parameters cannot contain new-line or tab characters, or more than 4 consecutive spaces.",
  },
  133010: {
    status: 400,
    title: "Phone number not registered",
    details: "The phone number is not registered.",
  },
};

/** A failure answered in Graph's error shape. */
export class GraphError extends Error {
  constructor(
    readonly graphCode: number,
    readonly details?: string,
  ) {
    super(details ?? `Graph error ${graphCode}`);
  }
}

export function graphErrorResponse(graphCode: number, details?: string): Response {
  const known = GRAPH_ERRORS[graphCode];
  const body = {
    error: {
      message: `(#${graphCode}) ${known?.title ?? "Simulated error"}`,
      type: "OAuthException",
      code: graphCode,
      error_data: { messaging_product: "whatsapp", details: details ?? known?.details ?? "Simulated error." },
      fbtrace_id: randomBytes(9).toString("base64url"),
    },
  };
  return Response.json(body, { status: known?.status ?? 400 });
}

/** A control API mistake: plain `{error: {message}}`. */
export class ControlError extends Error {
  constructor(
    message: string,
    readonly status = 400,
  ) {
    super(message);
  }
}

export function controlErrorResponse(message: string, status = 400): Response {
  return Response.json({ error: { message } }, { status });
}

interface ValidationErrorLike {
  all: { type: number; path: string; message: string }[];
}

/** `/template/components/0/type` -> `template['components'][0]['type']`, as Graph names parameters. */
export function graphParameterPath(path: string): string {
  const [first, ...rest] = path.split("/").filter(Boolean);
  if (!first) return "request body";
  return first + rest.map((part) => (/^\d+$/.test(part) ? `[${part}]` : `['${part}']`)).join("");
}

export function describeValidation(error: ValidationErrorLike, path: (raw: string) => string): string {
  const first = error.all[0];
  if (!first) return "The request is invalid.";
  if (first.type === ValueErrorType.ObjectRequiredProperty) {
    return `The parameter ${path(first.path)} is required.`;
  }
  return `Param ${path(first.path)} is invalid: ${first.message}.`;
}

/** A path nothing serves: the control API's 404, or Graph's "Unknown path components". */
export function unknownPathResponse(request: Request): Response {
  const { pathname } = new URL(request.url);
  return pathname.startsWith("/_sim/")
    ? controlErrorResponse(`Unknown control route: ${request.method} ${pathname}`, 404)
    : Response.json(
        {
          error: {
            message: `Unknown path components: ${request.method} ${pathname}`,
            type: "OAuthException",
            code: 2500,
            fbtrace_id: randomBytes(9).toString("base64url"),
          },
        },
        { status: 404 },
      );
}

export function describeFailure(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
