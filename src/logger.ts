import pino from "pino";

export type Logger = pino.Logger;

/** JSON lines on stdout. Secrets and message bodies are never passed to it; redaction is a backstop. */
export function createLogger(level: string, name?: string): Logger {
  return pino({
    level,
    name,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: [
        "client_secret",
        "access_token",
        "authorization",
        "*.client_secret",
        "*.access_token",
        "*.authorization",
      ],
      censor: "[redacted]",
    },
  });
}
