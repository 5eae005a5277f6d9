import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { chooseTemplate, launchChromium, screenshot } from "../support/browser.ts";
import { addSender, customerWrites, simulatorSends } from "../support/fixtures.ts";
import {
  createTestEnv,
  eventually,
  requestToken,
  spawnWorker,
  type TestEnv,
  type WorkerProcess,
} from "../support/index.ts";
import { createPanelUserWithTenant } from "../support/panel.ts";

/**
 * The panel in a real headless Chromium (issue 6): a person signs in, creates an application and
 * uses its secret, revokes it, adds a webhook endpoint (issue 22), watches a customer's message
 * arrive without reloading, answers it,
 * and meets the template-only reply once the window has closed. Another tenant sees none of it.
 * Screenshots of the main pages land in test-results/screenshots/.
 */
const PHONE_NUMBER_ID = "377000000000001";
const CUSTOMER = "+4915112340001";
const WAIT = { timeout: 15_000 };

let env: TestEnv;
let browser: Browser;
let workers: WorkerProcess[] = [];
let owner: Awaited<ReturnType<typeof createPanelUserWithTenant>>;
let stranger: Awaited<ReturnType<typeof createPanelUserWithTenant>>;
let context: BrowserContext;
let page: Page;
const policyViolations: string[] = [];
let contactId = "";

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  owner = await createPanelUserWithTenant(env.deps, { tenantName: "Blue Bicycle Shop" });
  stranger = await createPanelUserWithTenant(env.deps, { tenantName: "Other Company" });
  await addSender(env, owner.tenant.id, {
    phoneNumber: "+15550107701",
    phoneNumberId: PHONE_NUMBER_ID,
    wabaId: "477000000000001",
    name: "Blue Bicycle Shop",
    templates: true,
  });
  workers = [spawnWorker(env, "finalize"), spawnWorker(env, "send"), spawnWorker(env, "status")];
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  page = await context.newPage();
  // Inline script or style would be blocked by the panel's CSP and show up here.
  page.on("console", (message) => {
    if (message.type() === "error" && /Content Security Policy|Refused to/i.test(message.text()))
      policyViolations.push(message.text());
  });
  page.on("dialog", (dialog) => void dialog.accept());
});
afterAll(async () => {
  await browser?.close();
  await Promise.all(workers.map((worker) => worker.stop()));
  await env.close();
});

const url = (path: string) => `${env.apiUrl}${path}`;

async function signIn(target: Page, account: { email: string; password: string }) {
  await target.goto(url("/panel"));
  await target.getByLabel("Email").fill(account.email);
  await target.getByLabel("Password").fill(account.password);
  await target.getByRole("button", { name: "Sign in" }).click();
  await target.waitForURL(/\/panel\/conversations/);
}

async function inbound(text: string) {
  await customerWrites(env, PHONE_NUMBER_ID, { from: CUSTOMER, type: "text", text, name: "Ada Lovelace" });
}

describe("the panel in a browser", () => {
  test("sign in", async () => {
    await page.goto(url("/panel/applications"));
    expect(page.url()).toContain("/panel/sign-in");
    await screenshot(page, "01-sign-in");
    await page.getByLabel("Email").fill(owner.email);
    await page.getByLabel("Password").fill("wrong password!");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").filter({ hasText: "not correct" }).waitFor(WAIT);

    await page.getByLabel("Password").fill(owner.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(/\/panel\/applications$/);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Applications");
    const cookie = (await context.cookies()).find((c) => c.name === "panel_session");
    expect(cookie?.httpOnly).toBe(true);
    expect(cookie?.sameSite).toBe("Lax");
  });

  test("create an application, read its secret once, get a token with it, revoke it", async () => {
    await page.goto(url("/panel/applications"));
    await page.locator("#app-name").fill("Order system");
    await page.getByRole("button", { name: "Create application" }).click();
    const secret = (await page.locator("#client-secret").textContent())?.trim() ?? "";
    const clientId = (await page.locator("#client-id").textContent())?.trim() ?? "";
    expect(secret).toMatch(/^csec_/);
    expect(clientId).toMatch(/^cid_/);
    await screenshot(page, "03-application-created");

    await page.goto(url("/panel/applications"));
    expect(await page.content()).not.toContain(secret);
    expect(await page.content()).toContain(clientId);
    await screenshot(page, "02-applications");

    const granted = await requestToken(env.app, clientId, secret);
    expect(granted.status).toBe(200);
    expect((granted.body as { access_token: string }).access_token).toBeString();

    await page.getByRole("link", { name: /Revoke.*Order system/ }).click();
    await page.getByRole("heading", { level: 1, name: /Revoke/ }).waitFor(WAIT);
    expect(await page.content()).toContain("keep working until they expire");
    await screenshot(page, "04-revoke-confirmation");
    await page.getByRole("button", { name: "Revoke application" }).click();
    await page.waitForURL(/\/panel\/applications\?revoked=/);
    await page.getByRole("status").filter({ hasText: "revoked" }).first().waitFor(WAIT);

    const refused = await requestToken(env.app, clientId, secret);
    expect(refused.status).toBe(401);
    expect((refused.body as { error: string }).error).toBe("invalid_client");
  });

  test("senders and templates", async () => {
    await page.goto(url("/panel/senders"));
    await page.getByText("+15550107701").first().waitFor(WAIT);
    await page.getByText("order_shipped").first().waitFor(WAIT);
    expect(await page.locator("mark.var").count()).toBeGreaterThan(0);
    await screenshot(page, "05-senders-templates");
  });

  test("webhooks: create an endpoint, read its secret once, see it listed", async () => {
    await page.getByRole("navigation", { name: "Panel" }).getByRole("link", { name: "Webhooks" }).click();
    await page.waitForURL(/\/panel\/webhooks$/);
    await page.getByText("No endpoints yet").waitFor(WAIT);
    await page.getByLabel("URL").fill("https://hooks.bluebicycle.example/messaging");
    await page.getByLabel("message.received").check();
    await page.getByLabel("Description").fill("Order system");
    await page.getByRole("button", { name: "Create endpoint" }).click();
    const secret = (await page.locator("#endpoint-secret").textContent())?.trim() ?? "";
    expect(secret).toMatch(/^whsec_/);
    await screenshot(page, "05b-webhook-created");

    await page.getByRole("link", { name: /back to webhooks/ }).click();
    const card = page.locator("section.endpoint", { hasText: "https://hooks.bluebicycle.example/messaging" });
    await card.waitFor(WAIT);
    expect(await card.textContent()).toContain("Order system");
    expect(await card.locator("code.scope").allTextContents()).toEqual(["message.received"]);
    expect(await page.content()).not.toContain(secret);
    await screenshot(page, "05c-webhooks");
  });

  test("a customer's message appears in the list and the conversation without a reload", async () => {
    await page.goto(url("/panel/conversations"));
    await page.evaluate(() => {
      (window as unknown as { notReloaded: boolean }).notReloaded = true;
    });
    await inbound("Hello! Where is my order #1234?");
    const row = page.locator("#conversation-list a.conversation-link", { hasText: "Where is my order" });
    await row.waitFor(WAIT);
    expect(await row.textContent()).toContain("Ada Lovelace");
    expect(await page.locator("#conversation-list .badge.count").count()).toBeGreaterThan(0);
    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(
      true,
    );
    await screenshot(page, "06-conversations");

    await row.click();
    await page.waitForURL(/\/panel\/conversations\/ctc_/);
    contactId = /\/conversations\/(ctc_[0-9A-Za-z]+)/.exec(page.url())?.[1] ?? "";
    await page.locator("#thread", { hasText: "Where is my order" }).waitFor(WAIT);
    await page.evaluate(() => {
      (window as unknown as { notReloaded: boolean }).notReloaded = true;
    });
    await inbound("It was supposed to arrive yesterday.");
    await page.locator("#thread", { hasText: "supposed to arrive yesterday" }).waitFor(WAIT);
    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(
      true,
    );
  });

  test("reply inside the window", async () => {
    // The app's clock (a test clock, frozen at the start) catches up with the provider's timestamps.
    env.clock.set(new Date());
    await page.locator("#reply-body").fill("Sorry! It ships today, you will get a tracking link.");
    await page.locator("#reply-send").click();
    await page.locator("#thread", { hasText: "It ships today" }).waitFor(WAIT);
    const sent = await eventually(async () => {
      const sends = await simulatorSends(env, PHONE_NUMBER_ID);
      const mine = sends.filter((send) => send.payload.text?.body?.includes("It ships today"));
      return mine.length > 0 && mine;
    }, 15_000);
    expect(sent).toHaveLength(1);
    await screenshot(page, "07-conversation");
    await page.setViewportSize({ width: 390, height: 844 });
    await screenshot(page, "08-conversation-phone");
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  test("once the window has closed, only templates are offered", async () => {
    // A day later; sessions last 12 hours, so the owner signs in again first.
    env.clock.advance(25 * 3600);
    const conversation = page.url();
    await page.reload();
    expect(page.url()).toContain("/panel/sign-in");
    await page.getByLabel("Email").fill(owner.email);
    await page.getByLabel("Password").fill(owner.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(conversation);
    await page.locator("#reply-template").waitFor(WAIT);
    expect(await page.locator("#reply-body").count()).toBe(0);
    await chooseTemplate(page, "order_shipped (en)");
    await page.locator("#template-fields input[type=text]").first().waitFor(WAIT);
    const inputs = page.locator("#template-fields input[type=text]");
    expect(await inputs.count()).toBe(2);
    await inputs.nth(0).fill("Ada");
    await inputs.nth(1).fill("#1234");
    await screenshot(page, "09-template-reply");
    await page.locator("#reply-template-send").click();
    await page.locator("#thread", { hasText: "your order #1234 has shipped" }).waitFor(WAIT);
  });

  test("the panel runs under its CSP: no inline script or style was blocked", () => {
    expect(policyViolations).toEqual([]);
  });

  test("another tenant's user sees none of this tenant's data, also by URL", async () => {
    const otherContext = await browser.newContext();
    try {
      const other = await otherContext.newPage();
      await signIn(other, stranger);
      expect(await other.locator("#conversation-list").textContent()).not.toContain("Ada Lovelace");
      const view = await other.goto(url(`/panel/conversations/${contactId}`));
      expect(view?.status()).toBe(404);
      expect(await other.content()).not.toContain("Where is my order");
      const thread = await other.goto(url(`/panel/conversations/${contactId}/thread`));
      expect(thread?.status()).toBe(404);
      const applications = await env.deps.db
        .selectFrom("applications")
        .select("client_id")
        .where("tenant_id", "=", owner.tenant.id)
        .execute();
      for (const { client_id } of applications) {
        const revoke = await other.goto(url(`/panel/applications/${client_id}/revoke`));
        expect(revoke?.status()).toBe(404);
      }
      await other.goto(url("/panel/applications"));
      expect(await other.content()).not.toContain("Order system");
      await other.goto(url("/panel/senders"));
      expect(await other.content()).not.toContain("+15550107701");
      await other.goto(url("/panel/webhooks"));
      expect(await other.content()).not.toContain("hooks.bluebicycle.example");
    } finally {
      await otherContext.close();
    }
  });

  test("a state-changing request without the CSRF token is refused", async () => {
    // The browser's own cookies, but no token: what a forged cross-site form would carry at best.
    const before = await env.deps.db
      .selectFrom("applications")
      .select("client_id")
      .where("tenant_id", "=", owner.tenant.id)
      .execute();
    const forged = await page.request.post(url("/panel/applications"), {
      form: { name: "Forged", scopes: "messaging:send" },
      maxRedirects: 0,
    });
    expect(forged.status()).toBe(403);
    const reply = await page.request.post(url(`/panel/conversations/${contactId}/messages`), {
      form: { body: "forged" },
      maxRedirects: 0,
    });
    expect(reply.status()).toBe(403);
    const after = await env.deps.db
      .selectFrom("applications")
      .select("client_id")
      .where("tenant_id", "=", owner.tenant.id)
      .execute();
    expect(after).toHaveLength(before.length);
  });
});
