import { jwt } from "@elysiajs/jwt";
import { type Clock, epochSeconds } from "../clock.ts";
import { deriveKey } from "../crypto/keys.ts";
import type { AuthContext, Scope, TokenService } from "../http/request-state.ts";

/** SPEC §5: fixed lifetime, stateless (no revocation list). */
export const TOKEN_LIFETIME_SECONDS = 3600;
const ISSUER = "messaging-notification-service";
const AUDIENCE = "v2";

interface TokenClaims {
  sub: string;
  ten: string;
  scope: string;
  /** [read, send] requests per second, fixed when the application is created. */
  lim: [number, number];
}

const VERIFIED_CACHE_SIZE = 10_000;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
// We issue nothing that lives longer; the minute covers clocks of replicas that disagree a little.
const MAX_EXP_AHEAD_SECONDS = TOKEN_LIFETIME_SECONDS + 60;

/** The @elysiajs/jwt plugin's signer/verifier, used outside a request so every process shares it. */
function signerFor(rootSecret: string): JwtSigner {
  const secret = deriveKey(rootSecret, "access-token");
  const plugin = jwt({ name: "tokens", secret, alg: "HS256", iss: ISSUER, aud: AUDIENCE });
  return (plugin as unknown as { singleton: { decorator: { tokens: JwtSigner } } }).singleton.decorator
    .tokens;
}

/**
 * Signs with the key of `secret`; verifies with it, then with the keys of `previousSecrets`, so the
 * tokens issued before a rotation of the root secret live out their hour.
 */
export function createTokenService(
  secret: string,
  clock: Clock,
  previousSecrets: string[] = [],
): TokenService {
  const signer = signerFor(secret);
  const verifiers = [signer, ...previousSecrets.map(signerFor)];
  const verified = new Map<string, { auth: AuthContext; exp: number }>();
  const verifyAt = async (token: string, at: Date) => {
    const options = {
      algorithms: ["HS256"],
      issuer: ISSUER,
      audience: AUDIENCE,
      currentDate: at,
      // Without exp a stolen token would be valid forever.
      requiredClaims: ["exp"],
    };
    for (const verifier of verifiers) {
      const payload = await verifier.verify(token, options);
      if (payload) return payload;
    }
    return false;
  };

  return {
    async issue(auth) {
      const claims: TokenClaims = {
        sub: auth.clientId,
        ten: auth.tenantId,
        scope: auth.scopes.join(" "),
        lim: [auth.readLimit, auth.sendLimit],
      };
      const token = await signer.sign({
        ...claims,
        exp: epochSeconds(clock.now()) + TOKEN_LIFETIME_SECONDS,
        iat: false,
      });
      return { token, expiresIn: TOKEN_LIFETIME_SECONDS };
    },

    async check(token) {
      if (!JWT_SHAPE.test(token) || token.length > 4096) return { ok: false, problem: "malformed" };
      const now = clock.now();
      // A client reuses its token for up to an hour: verify its signature once, not per request.
      const known = verified.get(token);
      if (known && known.exp > epochSeconds(now)) return { ok: true, auth: known.auth };
      const payload = await verifyAt(token, now);
      if (payload) {
        const claims = payload as unknown as TokenClaims;
        if (typeof claims.sub !== "string" || typeof claims.ten !== "string" || !Array.isArray(claims.lim)) {
          return { ok: false, problem: "invalid" };
        }
        if (typeof payload.exp !== "number" || payload.exp > epochSeconds(now) + MAX_EXP_AHEAD_SECONDS) {
          return { ok: false, problem: "invalid" };
        }
        const auth: AuthContext = {
          clientId: claims.sub,
          tenantId: claims.ten,
          scopes: String(claims.scope ?? "")
            .split(" ")
            .filter(Boolean) as Scope[],
          readLimit: Number(claims.lim[0]),
          sendLimit: Number(claims.lim[1]),
        };
        if (verified.size >= VERIFIED_CACHE_SIZE) verified.clear();
        verified.set(token, { auth, exp: Number(payload.exp) });
        return { ok: true, auth };
      }
      // Tell "expired" from "forged": a token that verifies just before its exp was genuine.
      const exp = readExpiry(token);
      if (
        exp !== undefined &&
        exp <= epochSeconds(now) &&
        (await verifyAt(token, new Date((exp - 1) * 1000)))
      ) {
        return { ok: false, problem: "expired" };
      }
      return { ok: false, problem: "invalid" };
    },
  };
}

interface JwtSigner {
  sign(claims: Record<string, unknown>): Promise<string>;
  verify(token: string, options: Record<string, unknown>): Promise<Record<string, unknown> | false>;
}

function readExpiry(token: string): number | undefined {
  try {
    const payload = JSON.parse(Buffer.from(token.split(".")[1] ?? "", "base64url").toString("utf8"));
    return typeof payload.exp === "number" ? payload.exp : undefined;
  } catch {
    return undefined;
  }
}
