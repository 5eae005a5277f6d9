import type { ApiError, OAuthError } from "../http/errors.ts";
import type { TokenService } from "../http/request-state.ts";
import type { Logger } from "../logger.ts";
import type { AdmitSend } from "../messages/admission.ts";
import type { Metrics } from "../metrics/index.ts";
import type { RedisClient, RedisKeys } from "../redis/connect.ts";

/** What the request pipeline (request-pipeline.ts) is built from. */
export interface PipelineDeps {
  publicBaseUrl: string;
  /** Proxies of ours in front (see clientIpOf). */
  trustProxy: number;
  redis: RedisClient;
  keys: RedisKeys;
  tokens: TokenService;
  logger: Logger;
  metrics: Metrics;
  /**
   * Per-IP requests per second: callers of the API without a valid token (`anonymous`), the token
   * endpoint (`token`, before the body is read, besides its per-client limit), the panel and the
   * operator endpoints.
   */
  ipLimits: { anonymous: number; token: number; panel: number; ops: number };
  /** The admission of a route whose policy says `send-admission` (src/messages/admission.ts). */
  admitSend: AdmitSend;
  /**
   * Errors of routes whose policy says `errors: "page"` are HTML pages, and so are the 404s of paths
   * under `prefix` that match no route (the panel's).
   */
  pageErrors?: { prefix: string; render(failure: ApiError | OAuthError, requestId: string): Response };
}

/** The response headers a hook may set (Elysia's `set`). */
export type ResponseSet = { headers: Record<string, unknown> };
