import { createHash, timingSafeEqual } from "node:crypto";
import type { Config } from "../config.ts";
import { ApiError } from "../http/errors.ts";

/**
 * The one guard of the operator endpoints (/metrics, /ops/queues): HTTP Basic with OPS_USER and
 * OPS_PASSWORD. Without them the endpoints are open in development and do not exist otherwise (not
 * registered, see ops/routes.ts), so a production deployment never exposes them by accident.
 */

const OPS_REALM = 'Basic realm="ops"';

export type OpsAccess =
  | { mode: "open" }
  | { mode: "disabled" }
  | { mode: "basic"; user: Buffer; password: Buffer };

export function opsAccess(config: Pick<Config, "opsUser" | "opsPassword" | "nodeEnv">): OpsAccess {
  if (config.opsUser && config.opsPassword)
    return { mode: "basic", user: digest(config.opsUser), password: digest(config.opsPassword) };
  return config.nodeEnv === "development" ? { mode: "open" } : { mode: "disabled" };
}

/** Throws unless the request may reach an operator endpoint; rendered by the pipeline's onError. */
export function checkOpsRequest(access: Exclude<OpsAccess, { mode: "disabled" }>, request: Request): void {
  if (access.mode === "basic" && !credentialsMatch(access, request.headers.get("authorization"))) {
    throw new ApiError("unauthorized", "Operator credentials (HTTP Basic) are required.", {
      headers: { "www-authenticate": OPS_REALM },
    });
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
