import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { AppDeps } from "../app-deps.ts";
import { deriveKey } from "../crypto/keys.ts";
import { loadPanelSession, type PanelSession } from "../users/service.ts";
import type { Html } from "./html.ts";
import { errorPage } from "./layout.ts";
import { CSRF_FIELD, CSRF_HEADER, PANEL_PREFIX } from "./paths.ts";

export const SESSION_COOKIE = "panel_session";
/** Double-submit token of the sign-in form (there is no session to bind it to yet). */
export const SIGN_IN_CSRF_COOKIE = "panel_sign_in";

/** What a panel handler gets: the signed-in user's session (tenant included) and the request. */
export interface PanelContext {
  deps: AppDeps;
  request: Request;
  params: Record<string, string>;
  query: Record<string, string | undefined>;
  /** A urlencoded form body as an object; {} for none. */
  form: Record<string, string | string[]>;
  session: PanelSession;
  /** This session's CSRF token, for forms and htmx requests. */
  csrf: string;
  /** True for requests made by htmx (they get fragments and HX-Redirect instead of pages). */
  htmx: boolean;
}

// Strict: scripts and styles only from our own /panel/assets; no inline script, no framing.
const SECURITY_HEADERS: Record<string, string> = {
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "same-origin",
};

export function htmlResponse(
  body: Html,
  init: { status?: number; headers?: Record<string, string>; cookies?: string[] } = {},
): Response {
  const headers = new Headers({
    "content-type": "text/html; charset=utf-8",
    // Pages show tenant data and secrets: never from a shared or back-button cache.
    "cache-control": "no-store",
    ...SECURITY_HEADERS,
    ...init.headers,
  });
  for (const cookie of init.cookies ?? []) headers.append("set-cookie", cookie);
  return new Response(body.value, { status: init.status ?? 200, headers });
}

/** 303 after a form post, so a reload does not post it again; htmx follows HX-Redirect instead. */
export function redirect(location: string, htmx: boolean, cookies: string[] = []): Response {
  const headers = new Headers(htmx ? { "hx-redirect": location } : { location });
  headers.set("cache-control", "no-store");
  for (const cookie of cookies) headers.append("set-cookie", cookie);
  return new Response(null, { status: htmx ? 200 : 303, headers });
}

export function readCookie(request: Request, name: string): string | undefined {
  const header = request.headers.get("cookie");
  if (!header) return undefined;
  return new Bun.CookieMap(header).get(name) ?? undefined;
}

export function cookieHeader(
  name: string,
  value: string,
  options: { secure: boolean; maxAgeSeconds: number },
): string {
  return new Bun.Cookie(name, value, {
    path: PANEL_PREFIX,
    httpOnly: true,
    sameSite: "lax",
    secure: options.secure,
    maxAge: options.maxAgeSeconds,
  }).toString();
}

export function expiredCookie(name: string, secure: boolean): string {
  return cookieHeader(name, "", { secure, maxAgeSeconds: 0 });
}

/**
 * `Secure` unless NODE_ENV=development is set (a developer's http://localhost would otherwise drop
 * the cookie); an unset NODE_ENV gets `Secure` too.
 */
export function secureCookies(deps: AppDeps): boolean {
  return !deps.config.isDevelopment;
}

export function newFormToken(): string {
  return randomBytes(24).toString("base64url");
}

/** Bound to the session: a token from one session is worthless in another. `key`: the "panel-csrf" key. */
export function csrfTokenFor(key: Buffer, session: PanelSession): string {
  return createHmac("sha256", key).update("panel-csrf\0").update(session.digest).digest("base64url");
}

export function sameToken(given: string | undefined, expected: string | undefined): boolean {
  if (!given || !expected) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The token a form or htmx request carries: the header (htmx) or the hidden field (plain forms). */
export function givenCsrfToken(
  request: Request,
  form: Record<string, string | string[]>,
): string | undefined {
  const field = form[CSRF_FIELD];
  return request.headers.get(CSRF_HEADER) ?? (typeof field === "string" ? field : undefined);
}

export function formFields(body: unknown): Record<string, string | string[]> {
  if (!body || typeof body !== "object" || Array.isArray(body)) return {};
  const out: Record<string, string | string[]> = {};
  for (const [key, value] of Object.entries(body)) {
    if (typeof value === "string") out[key] = value;
    else if (Array.isArray(value)) out[key] = value.filter((v): v is string => typeof v === "string");
  }
  return out;
}

/** One string field of a form (the first, when a field repeats). */
export function field(form: Record<string, string | string[]>, name: string): string {
  const value = form[name];
  return (Array.isArray(value) ? value[0] : value) ?? "";
}

/** Every value of a form field that may repeat (checkboxes): none when it was not sent. */
export function fields(form: Record<string, string | string[]>, name: string): string[] {
  const value = form[name];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

interface ElysiaLikeContext {
  request: Request;
  params?: Record<string, string>;
  query?: Record<string, string | undefined>;
  body?: unknown;
}

/**
 * A page or action for signed-in users. Without a live session: to the sign-in page (back here
 * after). A state-changing request without this session's CSRF token: 403, nothing changes.
 */
export function signedIn(deps: AppDeps, handler: (ctx: PanelContext) => Promise<Response> | Response) {
  return async (ctx: ElysiaLikeContext): Promise<Response> => {
    const { request } = ctx;
    const htmx = request.headers.get("hx-request") === "true";
    const token = readCookie(request, SESSION_COOKIE);
    const session = token ? await loadPanelSession(deps.db, token, deps.clock.now()) : undefined;
    if (!session) {
      const url = new URL(request.url);
      const back = request.method === "GET" && !htmx ? `${url.pathname}${url.search}` : PANEL_PREFIX;
      return redirect(`${PANEL_PREFIX}/sign-in?next=${encodeURIComponent(back)}`, htmx);
    }
    const csrf = csrfTokenFor(deriveKey(deps.config.jwtSecret, "panel-csrf"), session);
    const form = formFields(ctx.body);
    if (request.method !== "GET" && request.method !== "HEAD") {
      if (!sameToken(givenCsrfToken(request, form), csrf)) return forbiddenCsrf();
    }
    return handler({
      deps,
      request,
      params: ctx.params ?? {},
      query: ctx.query ?? {},
      form,
      session,
      csrf,
      htmx,
    });
  };
}

export function forbiddenCsrf(): Response {
  return htmlResponse(
    errorPage(
      403,
      "This form has expired",
      "The request did not carry this page's security token, so nothing was changed. Reload the page and try again.",
    ),
    { status: 403 },
  );
}

/** Only our own paths, so `next` cannot send a signed-in user to another site. */
export function safeNext(next: string | undefined): string {
  return next?.startsWith(`${PANEL_PREFIX}`) && !next.startsWith("//") && !/[\\\r\n]/.test(next)
    ? next
    : `${PANEL_PREFIX}/conversations`;
}
