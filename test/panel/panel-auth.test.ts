import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SIGN_IN_LIMITS } from "../../src/panel/sign-in.ts";
import { createTestEnv, type TestEnv } from "../support/index.ts";
import { createPanelUserWithTenant, PanelClient, signedInClient } from "../support/panel.ts";

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(() => env.close());

/** A new panel user, and a visitor on the sign-in form (with the form's token), not signed in yet. */
async function onSignInForm() {
  const { email, password } = await createPanelUserWithTenant(env.deps);
  const client = new PanelClient(env.app);
  await client.get("/panel/sign-in");
  return { email, password, client };
}

describe("panel sign-in", () => {
  test("a visitor without a session is sent to sign in, and back to the page after", async () => {
    const client = new PanelClient(env.app);
    const page = await client.get("/panel/applications");
    expect(page.status).toBe(303);
    expect(page.headers.get("location")).toBe("/panel/sign-in?next=%2Fpanel%2Fapplications");

    const form = await client.get("/panel/sign-in?next=%2Fpanel%2Fapplications");
    expect(form.status).toBe(200);
    expect(form.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(form.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(form.text).toContain('<label for="email">Email</label>');
    expect(form.text).toContain('<label for="password">Password</label>');
    expect(client.cookies.has("panel_sign_in")).toBe(true);
  });

  test("right password: a HttpOnly SameSite=Lax session cookie, then the page asked for", async () => {
    const { email, password, client } = await onSignInForm();
    const signIn = await client.post("/panel/sign-in", {
      email: email.toUpperCase(),
      password,
      next: "/panel/senders",
    });
    expect(signIn.status).toBe(303);
    expect(signIn.headers.get("location")).toBe("/panel/senders");
    const cookie = signIn.headers.getSetCookie().find((c) => c.startsWith("panel_session="));
    expect(cookie).toBeDefined();
    expect(cookie).toContain("HttpOnly");
    expect(cookie).toContain("SameSite=Lax");
    expect(cookie).toContain("Path=/panel");
    // Development (this test's NODE_ENV) serves http://localhost, where a Secure cookie is dropped.
    expect(cookie).not.toContain("Secure");

    const senders = await client.get("/panel/senders");
    expect(senders.status).toBe(200);
    expect(senders.text).toContain(email);
  });

  test("a foreign next is ignored", async () => {
    const { email, password, client } = await onSignInForm();
    const signIn = await client.post("/panel/sign-in", { email, password, next: "https://evil.example/" });
    expect(signIn.headers.get("location")).toBe("/panel/conversations");
  });

  test("wrong password or unknown email: 401 and the same message", async () => {
    const { email, client } = await onSignInForm();
    const wrong = await client.post("/panel/sign-in", { email, password: "not the password" });
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain("The email or password is not correct.");
    expect(wrong.text).toContain(`value="${email}"`);
    const unknown = await client.post("/panel/sign-in", {
      email: "nobody@example.com",
      password: "whatever12",
    });
    expect(unknown.status).toBe(401);
    expect(unknown.text).toContain("The email or password is not correct.");
    expect(client.cookies.has("panel_session")).toBe(false);
  });

  test("a sign-in post without the form's token is refused", async () => {
    const { email, password, client } = await onSignInForm();
    const forged = await client.post("/panel/sign-in", { email, password, _csrf: "forged" });
    expect(forged.status).toBe(403);
    expect(client.cookies.has("panel_session")).toBe(false);
    const noCookie = new PanelClient(env.app);
    const blind = await noCookie.post("/panel/sign-in", { email, password, _csrf: "anything" });
    expect(blind.status).toBe(403);
  });

  test("attempts against one account are throttled with Retry-After", async () => {
    const { email, password, client } = await onSignInForm();
    for (let i = 0; i < SIGN_IN_LIMITS.perAccount; i++) {
      expect((await client.post("/panel/sign-in", { email, password: `guess-${i}-xxxx` })).status).toBe(401);
    }
    // Even the right password waits now: the throttle does not reveal which guess was right.
    const limited = await client.post("/panel/sign-in", { email, password });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(limited.text).toContain("Too many sign-in attempts");
    expect(client.cookies.has("panel_session")).toBe(false);
  });

  test("sign-out ends the session (the old cookie no longer works) and needs the CSRF token", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const forged = await client.request("POST", "/panel/sign-out", { form: { _csrf: "nope" } });
    expect(forged.status).toBe(403);
    const stolen = client.cookies.get("panel_session")!;

    const out = await client.post("/panel/sign-out");
    expect(out.status).toBe(303);
    expect(out.headers.get("location")).toBe("/panel/sign-in?signed_out=1");
    expect(client.cookies.has("panel_session")).toBe(false);

    const replay = new PanelClient(env.app);
    replay.cookies.set("panel_session", stolen);
    expect((await replay.get("/panel/conversations")).status).toBe(303);
  });

  test("errors under /panel are pages, not JSON", async () => {
    const { client } = await signedInClient(env.app, env.deps);
    const missing = await client.get("/panel/nothing-here");
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(missing.text).toContain("Page not found");
  });

  test("assets are served without a CDN", async () => {
    const client = new PanelClient(env.app);
    for (const name of ["panel.css", "panel.js", "htmx.min.js"]) {
      const asset = await client.get(`/panel/assets/${name}`);
      expect(asset.status).toBe(200);
      expect(asset.text.length).toBeGreaterThan(100);
    }
  });
});
