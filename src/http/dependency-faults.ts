import { ApiError } from "./errors.ts";

/**
 * Postgres or Redis away (a restart, a failover, a network cut), as opposed to a bug: the one
 * mapping every route answers with (503 `service_unavailable` and `Retry-After`, see
 * src/pipeline/request-pipeline.ts), and what the workers pause on (workers/runtime.ts).
 */

/** Error codes of a dependency that is away: Node socket errors and Postgres SQLSTATEs. */
const DOWN_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  // admin_shutdown, crash_shutdown, cannot_connect_now (starting up, shutting down, recovering)
  "57P01",
  "57P02",
  "57P03",
  // too_many_connections: the server is there but takes no one now
  "53300",
]);

/**
 * What pg, ioredis and the pool say when a connection broke or could not be had. The Redis replies
 * are a server that is loading its data or failing over; the last two, a Redis Cluster client with
 * no node to talk to.
 */
const DOWN_MESSAGE =
  /Connection terminated|timeout exceeded when trying to connect|is not queryable|Query read timeout|Connection is closed|Command aborted due to connection close|Stream isn't writeable|Command timed out|Socket timeout|connect ECONNREFUSED|connect ETIMEDOUT|^(LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|READONLY) |None of startup nodes is available|Cluster isn't ready/;

/** ioredis gives up on a command after `maxRetriesPerRequest` reconnects (src/redis/connect.ts). */
const DOWN_NAMES = new Set(["MaxRetriesPerRequestError", "ClusterAllFailedError"]);

/** Postgres or Redis unreachable (as opposed to a bug): answered with 503 and Retry-After. */
export function isDependencyDown(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > 3) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && (DOWN_CODES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
  if (DOWN_NAMES.has(error.name) || DOWN_MESSAGE.test(error.message)) return true;
  // A connect to several addresses fails with all of them; a wrapper keeps the fault as its cause.
  if (error instanceof AggregateError && error.errors.some((e) => isDependencyDown(e, depth + 1)))
    return true;
  return error.cause !== undefined && isDependencyDown(error.cause, depth + 1);
}

/** Seconds a client is told to wait: a restart or failover takes a few seconds. */
export const DEPENDENCY_RETRY_AFTER_SECONDS = 2;

/** The answer to a dependency fault, wherever it is caught. */
export function serviceUnavailable(): ApiError {
  return new ApiError("service_unavailable", "The service is briefly unavailable. Retry shortly.", {
    headers: { "retry-after": String(DEPENDENCY_RETRY_AFTER_SECONDS) },
  });
}
