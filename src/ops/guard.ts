import { createHash, timingSafeEqual } from "node:crypto";
import type { Config } from "../config.ts";
import { ApiError } from "../http/errors.ts";

/**
 * The one guard of the operator endpoints (/metrics, /ops/queues): HTTP Basic with OPS_USER and
 * OPS_PASSWORD. Without them the endpoints are open with NODE_ENV=development (set explicitly) and do
 * not exist otherwise (not registered, see ops/routes.ts), so no deployment exposes them by accident.
 */

const OPS_REALM = 'Basic realm="ops"';

export type OpsAccess =
  | { mode: "open" }
  | { mode: "disabled" }
  | { mode: "basic"; user: Buffer; password: Buffer };

export function opsAccess(config: Pick<Config, "opsUser" | "opsPassword" | "isDevelopment">): OpsAccess {
  if (config.opsUser && config.opsPassword)
    return { mode: "basic", user: digest(config.opsUser), password: digest(config.opsPassword) };
  return config.isDevelopment ? { mode: "open" } : { mode: "disabled" };
}

/** Failed operator credentials per client IP; past the limit, 429 before any credentials are checked. */
export const OPS_AUTH_FAILURES = { perIp: 10, windowSeconds: 15 * 60 } as const;

/**
 * The caller IP's failure window (scripts/attempt_window.lua with OPS_AUTH_FAILURES): "peek" asks
 * whether one more attempt may be made, no mode counts a failure. Replies {allowed, ttl, count}.
 */
export type OpsFailureWindow = (mode?: "peek") => Promise<[number, number, number]>;

/** Throws unless the request may reach an operator endpoint; rendered by the pipeline's onError. */
export async function checkOpsRequest(
  access: Exclude<OpsAccess, { mode: "disabled" }>,
  request: Request,
  failures: OpsFailureWindow,
): Promise<void> {
  if (access.mode === "basic") {
    // An address that kept failing is refused before its credentials are checked, right ones too:
    // no answer may tell it which guess was right.
    const [open, wait] = await failures("peek");
    if (open === 0) throw tooManyFailures(wait);
    if (!credentialsMatch(access, request.headers.get("authorization"))) {
      const [allowed, ttl] = await failures();
      if (allowed === 0) throw tooManyFailures(ttl);
      throw new ApiError("unauthorized", "Operator credentials (HTTP Basic) are required.", {
        headers: { "www-authenticate": OPS_REALM },
      });
    }
  }
  // Browsers send cached Basic credentials with cross-site requests too: a page elsewhere must not
  // be able to make an operator's browser retry, add or delete jobs (a form POST needs no preflight).
  const site = request.headers.get("sec-fetch-site");
  if (!SAFE_METHODS.has(request.method) && site !== null && site !== "same-origin" && site !== "none") {
    throw new ApiError("insufficient_scope", "Operator actions must come from the dashboard's own origin.", {
      status: 403,
    });
  }
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

function tooManyFailures(ttlSeconds: number): ApiError {
  return new ApiError(
    "rate_limit_exceeded",
    `Too many failed operator sign-ins from this address: the limit is ${OPS_AUTH_FAILURES.perIp} per ${OPS_AUTH_FAILURES.windowSeconds / 60} minutes.`,
    { headers: { "retry-after": String(Math.max(1, ttlSeconds)) } },
  );
}

function credentialsMatch(access: Extract<OpsAccess, { mode: "basic" }>, header: string | null): boolean {
  const match = /^Basic +([A-Za-z0-9+/=]+) *$/i.exec(header ?? "");
  if (!match?.[1]) return false;
  const decoded = Buffer.from(match[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) return false;
  // Digests make both sides the same length; compare both, always, in constant time.
  const userOk = timingSafeEqual(digest(decoded.slice(0, colon)), access.user);
  const passwordOk = timingSafeEqual(digest(decoded.slice(colon + 1)), access.password);
  return userOk && passwordOk;
}

function digest(value: string): Buffer {
  return createHash("sha256").update(value, "utf8").digest();
}
