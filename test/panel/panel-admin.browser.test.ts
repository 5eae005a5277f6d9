import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { createApplication, revokeApplication } from "../../src/applications/service.ts";
import { launchChromium, SCREENSHOT_DIR } from "../support/browser.ts";
import { addSender } from "../support/fixtures.ts";
import {
  createTestEnv,
  freePort,
  requestToken,
  startTestSimulator,
  type TestEnv,
  type TestSimulator,
} from "../support/index.ts";
import { createPanelUserWithTenant } from "../support/panel.ts";

/**
 * Issue 24, items 6 and 7, in a real headless Chromium at 1280 and 390 px (and the Applications table
 * at 1024 px): the links between the panel (the sign-in page too), /v2/docs and /v2/reference; the
 * favicon; the docs' table of contents; the reference's one way to authorize, used to call the API;
 * a secret rotated with an overlap; "Sync now" and a rejected template's reason; the queue
 * dashboard's title. Screenshots land in test-results/screenshots/<name>-<width>.png.
 */
const SHOTS = SCREENSHOT_DIR;
const WAIT = { timeout: 15_000 };
const WIDTHS = [1280, 390] as const;

let env: TestEnv;
let simulator: TestSimulator;
let origin = "";
let browser: Browser;
let owner: Awaited<ReturnType<typeof createPanelUserWithTenant>>;

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  // The document's server and token URL are the public base URL: here, where the browser finds us.
  simulator = await startTestSimulator();
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  env = await createTestEnv({
    env: { PUBLIC_BASE_URL: `${origin}/v2`, WHATSAPP_GRAPH_URL: simulator.url },
    limits: { anonymous: 10_000, token: 10_000 },
  });
  env.app.listen({ port, hostname: "127.0.0.1" });
  owner = await createPanelUserWithTenant(env.deps, { tenantName: "Blue Bicycle Shop" });
  await addSender(env, owner.tenant.id, {
    phoneNumber: "+15550107801",
    phoneNumberId: "377000000000101",
    wabaId: "477000000000101",
    name: "Blue Bicycle Shop",
    templates: true,
  });
  // A table as a tenant has it after a while: long names, both scopes, one revoked application.
  for (const name of ["Order system (production)", "Warehouse scanner", "Marketing exports (old)"]) {
    await createApplication(env.deps.db, { tenantId: owner.tenant.id, name });
  }
  const { application: revoked } = await createApplication(env.deps.db, {
    tenantId: owner.tenant.id,
    name: "Legacy shop backend (retired)",
  });
  await revokeApplication(env.deps.db, revoked.clientId, env.clock);
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await env?.app.stop(true);
  await simulator?.close();
  await env?.close();
});

const url = (path: string) => `${origin}${path}`;

async function shot(page: Page, name: string, width: number) {
  await page.screenshot({ path: `${SHOTS}/${name}-${width}.png`, fullPage: true });
}

/** How far the page, or one element, is wider than its box (0 when nothing overflows). */
async function overflow(page: Page, selector?: string): Promise<number> {
  return page.evaluate((sel) => {
    const element = sel ? document.querySelector(sel) : document.documentElement;
    if (!element) throw new Error(`no ${sel}`);
    return element.scrollWidth - element.clientWidth;
  }, selector);
}

for (const width of WIDTHS) {
  describe(`at ${width} px`, () => {
    let context: BrowserContext;
    let page: Page;
    const policyViolations: string[] = [];
    const notFound: string[] = [];

    beforeAll(async () => {
      context = await browser.newContext({ viewport: { width, height: 900 } });
      page = await context.newPage();
      page.on("console", (message) => {
        if (message.type() === "error" && /Content Security Policy|Refused to/i.test(message.text()))
          policyViolations.push(message.text());
      });
      page.on("response", (response) => {
        if (response.status() === 404) notFound.push(response.url());
      });
    });
    afterAll(async () => {
      await context?.close();
    });

    test("the favicon: 200 on every page, linked from panel, docs and reference", async () => {
      const ico = await page.request.get(url("/favicon.ico"));
      expect(ico.status()).toBe(200);
      expect(ico.headers()["content-type"]).toBe("image/x-icon");
      const bytes = await ico.body();
      expect([...bytes.subarray(0, 4)]).toEqual([0, 0, 1, 0]);
      const svg = await page.request.get(url("/favicon.svg"));
      expect(svg.status()).toBe(200);
      expect(svg.headers()["content-type"]).toBe("image/svg+xml");
      for (const path of ["/panel/sign-in", "/v2/docs", "/v2/reference"]) {
        await page.goto(url(path));
        const icons = await page
          .locator('link[rel="icon"]')
          .evaluateAll((links) => links.map((link) => (link as HTMLLinkElement).href));
        expect(icons, path).toEqual([url("/favicon.ico"), url("/favicon.svg")]);
      }
      // The image itself decodes (a broken ICO would not).
      await page.goto(url("/panel/sign-in"));
      const decoded = await page.evaluate(async (src) => {
        const image = new Image();
        image.src = src;
        await image.decode();
        return [image.naturalWidth, image.naturalHeight];
      }, url("/favicon.ico"));
      expect(decoded).toEqual([32, 32]);
      expect(notFound.filter((u) => u.includes("favicon"))).toEqual([]);
    });

    test("links: sign-in → reference → docs → panel, and from every panel page", async () => {
      await page.goto(url("/panel/sign-in"));
      await shot(page, "sign-in", width);
      const footer = page.getByRole("navigation", { name: "Developer documentation" });
      await footer.getByRole("link", { name: "API reference" }).click();
      await page.waitForURL(/\/v2\/reference$/);
      await page.locator(".swagger-ui .info").waitFor(WAIT);
      await page
        .getByRole("navigation", { name: "Developer documentation" })
        .getByRole("link", { name: "Docs & error codes" })
        .click();
      await page.waitForURL(/\/v2\/docs$/);
      await page.getByRole("link", { name: "API reference" }).waitFor(WAIT);
      await page
        .getByRole("navigation", { name: "Developer documentation" })
        .getByRole("link", { name: "Panel" })
        .click();
      await page.waitForURL(/\/panel\/sign-in/);

      await page.getByLabel("Email").fill(owner.email);
      await page.getByLabel("Password").fill(owner.password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(/\/panel\/conversations/);
      for (const path of [
        "/panel/conversations",
        "/panel/applications",
        "/panel/senders",
        "/panel/webhooks",
        "/panel/does-not-exist",
      ]) {
        await page.goto(url(path));
        const links = page.getByRole("navigation", { name: "Developer documentation" }).getByRole("link");
        expect(
          await links.evaluateAll((all) => all.map((a) => (a as HTMLAnchorElement).pathname)),
          path,
        ).toEqual(["/v2/reference", "/v2/docs"]);
      }
      // The docs link in the top bar on a wide laptop; narrower, the footer carries them.
      const topLink = page.locator(".topbar .docs-link");
      await page.goto(url("/panel/applications"));
      expect(await topLink.isVisible()).toBe(width > 1100);
      expect(await overflow(page)).toBe(0);
    });

    test("docs: a table of contents whose entries lead to their sections", async () => {
      await page.goto(url("/v2/docs"));
      const toc = page.getByRole("navigation", { name: "Contents" });
      await toc.waitFor(WAIT);
      const groups = await toc.locator(":scope > ol > li > a").allTextContents();
      expect(groups).toContain("API error codes");
      expect(groups).toContain("Token endpoint errors");
      expect(await toc.locator('a[href="#rate_limit_exceeded"]').count()).toBe(1);
      // Every entry names an anchor that exists.
      const targets = await toc
        .locator("a")
        .evaluateAll((links) => links.map((a) => (a as HTMLAnchorElement).hash.slice(1)));
      for (const id of targets) expect(await page.locator(`[id="${id}"]`).count(), id).toBe(1);
      await shot(page, "docs-toc", width);
      await toc.locator('a[href="#rate_limit_exceeded"]').click();
      await page.waitForURL(/#rate_limit_exceeded$/);
      expect(await page.locator("#rate_limit_exceeded").isVisible()).toBe(true);
      expect(await overflow(page)).toBe(0);
    });

    test("reference: one way to authorize, and it works; rate-limit headers on success and 429 answers only", async () => {
      const { application, clientSecret } = await createApplication(env.deps.db, {
        tenantId: owner.tenant.id,
        name: `Reference try-out ${width}`,
        scopes: ["messaging:read"],
      });
      await page.goto(url("/v2/reference"));
      await page.getByRole("button", { name: "Authorize" }).first().click();
      const dialog = page.locator(".modal-ux");
      await dialog.waitFor(WAIT);
      // One scheme in the dialog: OAuth 2.0 client credentials.
      expect(await dialog.locator(".auth-container").count()).toBe(1);
      expect(await dialog.locator(".auth-container h4").first().textContent()).toContain("oauth2");
      await shot(page, "reference-authorize", width);
      await dialog.getByLabel("client_id:").fill(application.clientId);
      await dialog.getByLabel("client_secret:").fill(clientSecret);
      // Swagger UI labels its buttons for screen readers ("Apply credentials"); their text is shown.
      await dialog.locator("button.modal-btn", { hasText: "Authorize" }).click();
      await dialog.locator("button.modal-btn", { hasText: "Logout" }).waitFor(WAIT);
      await dialog.locator("button.modal-btn", { hasText: "Close" }).click();

      const senders = page.locator("#operations-Senders-listSenders");
      await senders.locator(".opblock-summary").click();
      await senders.getByRole("button", { name: "Try it out" }).click();
      await senders.getByRole("button", { name: "Execute" }).click();
      await senders.locator(".live-responses-table tbody .response-col_status").first().waitFor(WAIT);
      expect(
        (
          await senders.locator(".live-responses-table tbody .response-col_status").first().textContent()
        )?.trim(),
      ).toBe("200");

      // The rate-limit headers are described once (components/headers): an operation lists them on
      // its success and 429 answers, not on each of its error answers.
      const send = page.locator("#operations-Messages-sendMessage");
      await send.locator(".opblock-summary").click();
      await send.locator(".responses-wrapper").waitFor(WAIT);
      const rows = await send
        .locator("tr.response")
        .evaluateAll((responses) =>
          responses.map((row) => [
            row.getAttribute("data-code"),
            row.querySelectorAll(".headers-wrapper tbody tr").length,
          ]),
        );
      for (const [code, count] of rows) {
        const paced = code === "200" || code === "201" || code === "429";
        expect(count, `POST /messages ${code}`).toBeLessThanOrEqual(paced ? 9 : 3);
      }
      expect(rows.map(([code]) => code)).toContain("409");
      const height = await send.evaluate((element) => element.getBoundingClientRect().height);
      console.log(`POST /messages expanded at ${width} px: ${Math.round(height)} px tall`);
      await shot(page, "reference-send-message", width);
      // The example shown is the one that the sandbox accepts (test/docs/openapi-example.test.ts).
      expect(await send.locator(".body-param__example, .microlight").first().textContent()).toContain(
        "order_shipped",
      );
      expect(policyViolations).toEqual([]);
    });

    test("applications: the table fits (1024 px too), and a secret rotated with an overlap", async () => {
      for (const viewport of width > 640 ? [1280, 1024] : [width]) {
        await page.setViewportSize({ width: viewport, height: 900 });
        await page.goto(url("/panel/applications"));
        await page.locator("table.applications").waitFor(WAIT);
        expect(await overflow(page, ".table-wrap"), `table at ${viewport}`).toBe(0);
        expect(await overflow(page), `page at ${viewport}`).toBe(0);
        // Every row's actions are inside the visible table.
        const cut = await page.evaluate(() => {
          const wrap = document.querySelector(".table-wrap")?.getBoundingClientRect();
          return [...document.querySelectorAll("table.applications .row-actions .button")].filter((b) => {
            const box = b.getBoundingClientRect();
            return !wrap || box.right > wrap.right + 0.5 || box.left < wrap.left - 0.5;
          }).length;
        });
        expect(cut, `actions cut off at ${viewport}`).toBe(0);
        await shot(page, "applications", viewport);
      }
      await page.setViewportSize({ width, height: 900 });

      const { application, clientSecret: oldSecret } = await createApplication(env.deps.db, {
        tenantId: owner.tenant.id,
        name: `Rotating ${width}`,
      });
      await page.goto(url("/panel/applications"));
      await page.getByRole("link", { name: `Rotate secret… of Rotating ${width}` }).click();
      await page.getByRole("heading", { level: 1, name: /Rotate the secret/ }).waitFor(WAIT);
      // None by default, as before.
      expect(await page.getByLabel("Stop the old secret now").isChecked()).toBe(true);
      await page.getByLabel("Keep the old secret working for 24 hours").check();
      await shot(page, "rotate-secret", width);
      await page.getByRole("button", { name: "Rotate secret" }).click();
      const newSecret = (await page.locator("#client-secret").textContent())?.trim() ?? "";
      expect(newSecret).toMatch(/^csec_/);
      await page.getByRole("status").filter({ hasText: "The old secret keeps working until" }).waitFor(WAIT);
      await shot(page, "rotated-secret", width);
      expect((await requestToken(env.app, application.clientId, oldSecret)).status).toBe(200);
      expect((await requestToken(env.app, application.clientId, newSecret)).status).toBe(200);

      await page.goto(url("/panel/applications"));
      const row = page.locator("tr", { hasText: `Rotating ${width}` });
      expect(await row.locator(".previous-secret").textContent()).toMatch(
        /Previous secret valid until \d{4}-\d\d-\d\d \d\d:\d\d UTC/,
      );
      expect(await overflow(page)).toBe(0);
      await shot(page, "applications-overlap", width);
    });

    test("senders: Sync now, and why a template was rejected", async () => {
      await page.goto(url("/panel/senders"));
      const rejected = page.locator("tr", { hasText: "old_promo" });
      expect(await rejected.locator(".rejection-reason").textContent()).toContain("INVALID_FORMAT");
      await page.getByRole("button", { name: /Sync now/ }).click();
      await page.waitForURL(/\/panel\/senders\?synced=snd_/);
      await page.getByRole("status").filter({ hasText: "Templates synced just now" }).waitFor(WAIT);
      expect(await overflow(page)).toBe(0);
      await shot(page, "senders", width);
    });

    test("the queue dashboard's title is not cut off", async () => {
      await page.goto(url("/ops/queues"));
      const title = page.getByText("Messaging queues", { exact: true }).first();
      await title.waitFor(WAIT);
      const cut = await title.evaluate((element) => element.scrollWidth - element.clientWidth);
      expect(cut).toBeLessThanOrEqual(0);
      // Nor cut at the bottom by the header (which hides what overflows it).
      const below = await title.evaluate((element) => {
        const header = element.closest("header");
        return header ? element.getBoundingClientRect().bottom - header.getBoundingClientRect().bottom : 0;
      });
      expect(below).toBeLessThanOrEqual(0);
      // Legible: not the board's light title colour on its light narrow-screen header.
      const colour = await title.evaluate((element) => getComputedStyle(element).color);
      if (width <= 768) expect(colour).not.toBe("rgb(245, 248, 250)");
      await shot(page, "ops-queues", width);
    });
  });
}
