import pino from "pino";

export type Logger = pino.Logger;

/**
 * Redacted wherever they appear at the top level or one level down (pino's `*.x`). Secrets and
 * message bodies are never passed to the logger; this is the backstop. Deliberately not listed:
 * `path`, `route`, `message` (pino's own and our log texts), `err`.
 */
const REDACT_PATHS = [
  "client_secret",
  "access_token",
  "accessToken",
  "authorization",
  "password",
  "cookie",
  "token",
  // Message content: free text, template bodies and whole request bodies.
  "body",
  "text",
].flatMap((field) => [field, `*.${field}`]);

/**
 * JSON lines, one object per event, on stdout (or `destination`, e.g. a stream a test reads).
 * Fields are snake_case; `name` is the process (api, send, ...).
 */
export function createLogger(level: string, name?: string, destination?: pino.DestinationStream): Logger {
  const options: pino.LoggerOptions = {
    level,
    name,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: [...REDACT_PATHS, '*["set-cookie"]'], censor: "[redacted]" },
  };
  return destination ? pino(options, destination) : pino(options);
}
