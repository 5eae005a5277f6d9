import { createHash, timingSafeEqual } from "node:crypto";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/connect.ts";
import { DEFAULT_LIMITS } from "../http/rate-limit.ts";
import { ALL_SCOPES, type Scope } from "../http/request-state.ts";
import { newId } from "../ids.ts";
import {
  type ApplicationRecord,
  type ApplicationScope,
  findApplicationByClientId,
  insertApplication,
  updateApplication,
} from "./repository.ts";

/** 40 base62 characters is ~238 bits: far beyond guessing, so a plain SHA-256 digest is a safe store. */
const SECRET_LENGTH = 40;

function digestSecret(secret: string): Buffer {
  return createHash("sha256").update(secret, "utf8").digest();
}

// Compared against when the client_id is unknown, so timing does not reveal which ids exist.
const DECOY_DIGEST = digestSecret(newId("csec", SECRET_LENGTH));

export function parseScopes(value: string): Scope[] | undefined {
  const scopes = value.split(/\s+/).filter(Boolean);
  if (scopes.length === 0 || !scopes.every((s) => (ALL_SCOPES as readonly string[]).includes(s)))
    return undefined;
  return [...new Set(scopes)] as Scope[];
}

export async function createApplication(
  db: Db,
  input: { tenantId: string; name: string; scopes?: Scope[]; readLimit?: number; sendLimit?: number },
): Promise<{ application: ApplicationRecord; clientSecret: string }> {
  const clientSecret = newId("csec", SECRET_LENGTH);
  const application = await insertApplication(db, {
    clientId: newId("cid"),
    tenantId: input.tenantId,
    name: input.name,
    secretDigest: digestSecret(clientSecret),
    scopes: input.scopes ?? [...ALL_SCOPES],
    readLimit: input.readLimit ?? DEFAULT_LIMITS.read,
    sendLimit: input.sendLimit ?? DEFAULT_LIMITS.send,
  });
  return { application, clientSecret };
}

/** The longest overlap a rotation may give the replaced secret. */
export const MAX_SECRET_OVERLAP_SECONDS = 30 * 86_400;

/** What a rotation does with the secret it replaces. */
export interface SecretOverlap {
  /** Seconds the replaced secret keeps working; 0 (the default): it stops at once. */
  seconds: number;
  /** Now, by the service's clock. */
  now: Date;
}

/**
 * A new secret. By default the old one stops working at once (tokens already issued live until
 * they expire); with `overlap.seconds` > 0 it keeps working that long, so a system can move to the
 * new one without a gap (only the secret just replaced: a secret replaced earlier stops now).
 * `scope` narrows it to one tenant's application (the panel) and/or to one not revoked.
 */
export async function rotateApplicationSecret(
  db: Db,
  clientId: string,
  scope: ApplicationScope = {},
  overlap?: SecretOverlap,
): Promise<{ application: ApplicationRecord; clientSecret: string } | undefined> {
  const seconds = overlap?.seconds ?? 0;
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > MAX_SECRET_OVERLAP_SECONDS) {
    throw new RangeError(`a secret overlap is 0 to ${MAX_SECRET_OVERLAP_SECONDS} whole seconds`);
  }
  const clientSecret = newId("csec", SECRET_LENGTH);
  const application = await updateApplication(
    db,
    clientId,
    {
      secretDigest: digestSecret(clientSecret),
      ...(overlap &&
        seconds > 0 && { previousSecretExpiresAt: new Date(overlap.now.getTime() + seconds * 1000) }),
    },
    scope,
  );
  return application && { application, clientSecret };
}

/** When the secret replaced by the last rotation stops working, while it still works at `now`. */
export function previousSecretValidUntil(application: ApplicationRecord, now: Date): Date | undefined {
  const until = application.previousSecretExpiresAt;
  return application.previousSecretDigest && until && until > now ? until : undefined;
}

/** Revoked from now on; revoking again keeps the first time. `scope.tenantId`: the panel's. */
export async function revokeApplication(
  db: Db,
  clientId: string,
  clock: Clock,
  scope: Pick<ApplicationScope, "tenantId"> = {},
) {
  return updateApplication(db, clientId, { revokedAt: clock.now() }, scope);
}

/**
 * The application when the credentials are right and it is not revoked; constant-time compare. The
 * secret a rotation replaced is right too until its overlap ends (`now`, the service's clock).
 */
export async function authenticateClient(
  db: Db,
  clientId: string,
  clientSecret: string,
  now: Date = new Date(),
): Promise<ApplicationRecord | undefined> {
  const application = clientId.length <= 128 ? await findApplicationByClientId(db, clientId) : undefined;
  const given = digestSecret(clientSecret);
  // Both compared every time, so the timing does not tell whether an overlap is running.
  const current = timingSafeEqual(application?.secretDigest ?? DECOY_DIGEST, given);
  const previous = timingSafeEqual(application?.previousSecretDigest ?? DECOY_DIGEST, given);
  const overlapping = application !== undefined && previousSecretValidUntil(application, now) !== undefined;
  if (!application || !(current || (previous && overlapping)) || application.revokedAt) return undefined;
  return application;
}
