import { createHash } from "node:crypto";
import { Elysia } from "elysia";
import type { AppDeps } from "../app-deps.ts";
import { callerIp } from "../http/request-state.ts";
import { deletePanelSession } from "../users/repository.ts";
import {
  loadPanelSession,
  normalizeEmail,
  SESSION_TTL_MS,
  startPanelSession,
  verifyPanelCredentials,
} from "../users/service.ts";
import { html } from "./html.ts";
import { durationText, simplePage } from "./layout.ts";
import { CSRF_FIELD, PANEL_PREFIX } from "./paths.ts";
import {
  cookieHeader,
  expiredCookie,
  field,
  formFields,
  htmlResponse,
  newFormToken,
  readCookie,
  redirect,
  SESSION_COOKIE,
  SIGN_IN_CSRF_COOKIE,
  safeNext,
  sameToken,
  secureCookies,
  signedIn,
} from "./web.ts";

/**
 * Sign-in throttling that nobody can turn into a lock-out of someone else's account (the password is
 * verified before the account's count decides anything):
 * - per client IP, every attempt (`perIp`), refused with 429 before the password is checked;
 * - per (account, IP), every attempt (`perAccountAndIp`), refused with 429 before the password is
 *   checked, cleared by a successful sign-in: one address cannot keep guessing one account;
 * - per account, failures only, from every IP (`perAccount`): never refuses, so the right password
 *   always gets in; past it, each wrong answer waits 1, 2, 4 ... up to 10 s (guessing one account
 *   from many addresses gets slower and slower).
 */
export const SIGN_IN_LIMITS = {
  windowSeconds: 15 * 60,
  perIp: 30,
  perAccountAndIp: 10,
  perAccount: 10,
  maxFailureDelaySeconds: 10,
} as const;

/** How long a wrong answer waits once the account has had `failures` in its window. */
export function failureDelayMs(failures: number): number {
  const over = failures - SIGN_IN_LIMITS.perAccount;
  if (over <= 0) return 0;
  return Math.min(SIGN_IN_LIMITS.maxFailureDelaySeconds, 2 ** Math.min(over - 1, 10)) * 1000;
}

function signInForm(input: { csrf: string; next: string; email?: string; error?: string; notice?: string }) {
  const errorId = input.error ? "sign-in-error" : undefined;
  return simplePage(
    "Sign in",
    html`<div class="card sign-in">
<h1>Sign in to the messaging panel</h1>
${input.notice ? html`<p class="notice" role="status">${input.notice}</p>` : ""}
${input.error ? html`<p class="error" id="sign-in-error" role="alert">${input.error}</p>` : ""}
<form method="post" action="${PANEL_PREFIX}/sign-in" class="stack">
  <input type="hidden" name="${CSRF_FIELD}" value="${input.csrf}">
  <input type="hidden" name="next" value="${input.next}">
  <div class="field">
    <label for="email">Email</label>
    <input id="email" name="email" type="email" autocomplete="username" required value="${input.email ?? ""}"${errorId ? html` aria-describedby="${errorId}" aria-invalid="true"` : ""} autofocus>
  </div>
  <div class="field">
    <label for="password">Password</label>
    <input id="password" name="password" type="password" autocomplete="current-password" required${errorId ? html` aria-describedby="${errorId}" aria-invalid="true"` : ""}>
  </div>
  <button type="submit" class="button primary">Sign in</button>
</form>
</div>`,
  );
}

/** Sign-in and sign-out. Every other panel page sends a visitor without a session here. */
export function signInRoutes(deps: AppDeps) {
  const secure = secureCookies(deps);

  /** The form with a fresh double-submit token (its cookie lives as long as a form may sit open). */
  function formResponse(
    status: number,
    input: { next: string; email?: string; error?: string; notice?: string },
    headers: Record<string, string> = {},
  ): Response {
    const csrf = newFormToken();
    return htmlResponse(signInForm({ ...input, csrf }), {
      status,
      headers,
      cookies: [cookieHeader(SIGN_IN_CSRF_COOKIE, csrf, { secure, maxAgeSeconds: 3600 })],
    });
  }

  /** Counts this attempt from the IP and against the account from the IP; seconds to wait if refused. */
  async function throttled(ip: string, email: string | undefined): Promise<number | undefined> {
    const checks: [string, number][] = [[deps.keys.signInByIp(ip), SIGN_IN_LIMITS.perIp]];
    if (email) {
      checks.push([deps.keys.signInByAccountAndIp(accountDigest(email), ip), SIGN_IN_LIMITS.perAccountAndIp]);
    }
    // Both windows count this attempt, at once (their keys live in different cluster slots).
    const verdicts = await Promise.all(
      checks.map(([key, limit]) => deps.redis.attemptWindow(key, limit, SIGN_IN_LIMITS.windowSeconds)),
    );
    const waits = verdicts.filter(([allowed]) => allowed === 0).map(([, ttl]) => ttl);
    return waits.length > 0 ? Math.max(...waits) : undefined;
  }

  /** Counts a failure against the account (whatever the IP), and holds the answer once it is over. */
  async function failedAttempt(email: string | undefined): Promise<void> {
    if (!email) return;
    const [, , failures] = await deps.redis.attemptWindow(
      deps.keys.signInByAccount(accountDigest(email)),
      SIGN_IN_LIMITS.perAccount,
      SIGN_IN_LIMITS.windowSeconds,
    );
    const delay = failureDelayMs(failures);
    if (delay > 0) await Bun.sleep(delay);
  }

  return new Elysia({ prefix: PANEL_PREFIX })
    .get("/sign-in", async ({ request, query }) => {
      const next = safeNext(query.next);
      const token = readCookie(request, SESSION_COOKIE);
      if (token && (await loadPanelSession(deps.db, token, deps.clock.now()))) return redirect(next, false);
      return formResponse(200, {
        next,
        notice: query.signed_out === "1" ? "You are signed out." : undefined,
      });
    })
    .post("/sign-in", async ({ request, body }) => {
      const form = formFields(body);
      const next = safeNext(field(form, "next"));
      const email = field(form, "email").slice(0, 254);
      if (!sameToken(field(form, CSRF_FIELD), readCookie(request, SIGN_IN_CSRF_COOKIE))) {
        return formResponse(403, {
          next,
          email,
          error: "The sign-in form had expired. Please sign in again.",
        });
      }
      const normalized = normalizeEmail(email);
      const ip = callerIp(request);
      const wait = await throttled(ip, normalized);
      if (wait !== undefined) {
        return formResponse(
          429,
          {
            next,
            email,
            error: `Too many sign-in attempts. Try again in ${durationText(wait)}.`,
          },
          { "retry-after": String(wait) },
        );
      }
      const user = await verifyPanelCredentials(deps.db, email, field(form, "password"));
      if (!user) {
        // Unknown emails are counted and held the same way: the answer never tells which exist.
        await failedAttempt(normalized);
        return formResponse(401, { next, email, error: "The email or password is not correct." });
      }
      // The right password gets in whatever the account's failure count (others may be failing on
      // purpose), and clears this address's count against it. The account's failures stay (a
      // guesser elsewhere keeps its slow answers) and so does the IP's (it may be guessing others).
      if (normalized) await deps.redis.del(deps.keys.signInByAccountAndIp(accountDigest(normalized), ip));
      const token = await startPanelSession(deps.db, user, deps.clock.now());
      return redirect(next, false, [
        cookieHeader(SESSION_COOKIE, token, {
          secure,
          maxAgeSeconds: Math.floor(SESSION_TTL_MS / 1000),
        }),
        expiredCookie(SIGN_IN_CSRF_COOKIE, secure),
      ]);
    })
    .post(
      "/sign-out",
      signedIn(deps, async ({ session, htmx }) => {
        await deletePanelSession(deps.db, session.digest);
        return redirect(`${PANEL_PREFIX}/sign-in?signed_out=1`, htmx, [
          expiredCookie(SESSION_COOKIE, secure),
        ]);
      }),
    );
}

function accountDigest(email: string): string {
  return createHash("sha256").update(email).digest("hex").slice(0, 32);
}
