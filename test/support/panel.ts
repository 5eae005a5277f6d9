import { expect } from "bun:test";
import type { App } from "../../src/app.ts";
import type { AppDeps } from "../../src/app-deps.ts";
import { insertTenant } from "../../src/tenants/repository.ts";
import { createPanelUser } from "../../src/users/service.ts";

/** A panel page or action as a browser would send it (cookies and forms by hand). */
export interface PanelResponse {
  status: number;
  headers: Headers;
  text: string;
}

export class PanelClient {
  /** cookie name -> value, as the browser would keep them for /panel. */
  readonly cookies = new Map<string, string>();
  /** The CSRF token of the last page that carried one. */
  csrf = "";

  constructor(private readonly app: App) {}

  async request(
    method: string,
    path: string,
    options: { form?: Record<string, string | string[]>; headers?: Record<string, string> } = {},
  ): Promise<PanelResponse> {
    const headers: Record<string, string> = { ...options.headers };
    if (this.cookies.size > 0)
      headers.cookie = [...this.cookies].map(([name, value]) => `${name}=${value}`).join("; ");
    let body: string | undefined;
    if (options.form) {
      const params = new URLSearchParams();
      for (const [key, value] of Object.entries(options.form))
        for (const v of Array.isArray(value) ? value : [value]) params.append(key, v);
      body = params.toString();
      headers["content-type"] = "application/x-www-form-urlencoded";
    }
    const response = await this.app.handle(
      new Request(`http://localhost${path}`, { method, headers, body, redirect: "manual" }),
    );
    for (const cookie of response.headers.getSetCookie()) {
      const parsed = new Bun.Cookie(cookie);
      if (parsed.maxAge === 0 || parsed.value === "") this.cookies.delete(parsed.name);
      else this.cookies.set(parsed.name, parsed.value);
    }
    const text = await response.text();
    const token = /name="_csrf" value="([^"]+)"/.exec(text)?.[1];
    if (token) this.csrf = token;
    return { status: response.status, headers: response.headers, text };
  }

  get(path: string, headers?: Record<string, string>) {
    return this.request("GET", path, { headers });
  }

  /** A form post carrying the current CSRF token (unless the form sets `_csrf` itself). */
  post(path: string, form: Record<string, string | string[]> = {}) {
    return this.request("POST", path, { form: { _csrf: this.csrf, ...form } });
  }

  async signIn(email: string, password: string): Promise<PanelResponse> {
    await this.get("/panel/sign-in");
    return this.post("/panel/sign-in", { email, password });
  }
}

export async function createPanelUserWithTenant(
  deps: AppDeps,
  options: { tenantName?: string; email?: string; password?: string } = {},
) {
  const tenant = await insertTenant(deps.db, { name: options.tenantName ?? "Acme" });
  const password = options.password ?? "correct horse battery";
  const user = await createPanelUser(deps.db, {
    tenantId: tenant.id,
    email: options.email ?? `owner-${tenant.id.slice(-6).toLowerCase()}@example.com`,
    password,
  });
  return { tenant, user, email: user.email, password };
}

/** Signed in as a new user of a new tenant. */
export async function signedInClient(app: App, deps: AppDeps, options: { tenantName?: string } = {}) {
  const account = await createPanelUserWithTenant(deps, options);
  const client = new PanelClient(app);
  const response = await client.signIn(account.email, account.password);
  if (response.status !== 303) throw new Error(`sign-in failed: ${response.status}`);
  await client.get("/panel/conversations"); // picks up the session's CSRF token
  return { client, ...account };
}

/** The page shows each of `parts`. */
export function expectShows(page: PanelResponse, parts: string[]) {
  for (const part of parts) expect(page.text).toContain(part);
}

/** A form post refused with 400 and `reason` on the form shown again; that page, for more checks. */
export async function postRefused(
  client: PanelClient,
  path: string,
  form: Record<string, string | string[]>,
  reason: string,
): Promise<PanelResponse> {
  const page = await client.post(path, form);
  expect(page.status).toBe(400);
  expect(page.text).toContain(reason);
  return page;
}
