import { expect } from "bun:test";
import { mkdirSync } from "node:fs";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium, SCREENSHOT_DIR } from "./browser.ts";
import { addSender, customerWrites } from "./fixtures.ts";
import { createTestEnv, eventually, spawnWorker, type TestEnv, type WorkerProcess } from "./index.ts";
import { createPanelUserWithTenant } from "./panel.ts";
import { insertOutbound } from "./reading.ts";

/**
 * What the Conversations browser tests share (test/panel/panel-conversations.browser.test.ts,
 * test/panel/panel-conversation-page.browser.test.ts): a signed-in Chromium page that records blocked
 * inline code and script errors, screenshots at 1280 and 390 px that also check for sideways
 * scrolling, customers writing through the simulator, and keyboard-only focus moves.
 */

/** Where the screenshots land: <dir>/<name>-<width>.png (with the other browser tests'). */
export const SHOTS = SCREENSHOT_DIR;
export const WIDTHS = [1280, 390] as const;
export const WAIT = { timeout: 15_000 };

/** A screenshot at each width; nothing may be wider than the viewport (no sideways scrolling on a phone). */
export async function shoot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  const before = page.viewportSize() ?? { width: 1280, height: 860 };
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: width === 390 ? 844 : 860 });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    // caret "initial": hiding the caret sets a style attribute on every input (and leaves style=""),
    // which htmx would then carry over to a swapped-in element: a CSP report that is the test's own.
    await page.screenshot({ path: `${SHOTS}/${name}-${width}.png`, fullPage: true, caret: "initial" });
  }
  await page.setViewportSize(before);
}

/** The tenant's contact with this number, once the finalize worker has made it. */
export function contactIdOf(env: TestEnv, tenantId: string, phone: string): Promise<string> {
  return eventually(async () => {
    const row = await env.deps.db
      .selectFrom("contacts")
      .select("id")
      .where("tenant_id", "=", tenantId)
      .where("phone", "=", phone)
      .executeTakeFirst();
    return row?.id;
  }, 15_000);
}

/** Presses Tab until `selector` has the focus (keyboard only); fails after `max` presses. */
export async function tabTo(page: Page, selector: string, max = 120): Promise<void> {
  for (let i = 0; i < max; i++) {
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return;
    await page.keyboard.press("Tab");
  }
  throw new Error(`Tab never reached ${selector}`);
}

/** What has the focus, as `tag#id` (`body` when it fell to the page). */
export function focused(page: Page): Promise<string> {
  return page.evaluate(() => {
    const active = document.activeElement;
    if (!active || active === document.body) return "body";
    return `${active.tagName.toLowerCase()}${active.id ? `#${active.id}` : ""}`;
  });
}

export interface SignedInPage {
  context: BrowserContext;
  page: Page;
  /** Inline code or styles the panel's CSP blocked (must stay empty). */
  policyViolations: string[];
  /** Uncaught script errors (must stay empty). */
  pageErrors: string[];
}

/** A new browser context signed in to the panel as `account`, on the conversations list. */
export async function signedInPage(
  browser: Browser,
  env: TestEnv,
  account: { email: string; password: string },
  options: { timezoneId?: string; locale?: string } = {},
): Promise<SignedInPage> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, ...options });
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: env.apiUrl });
  const page = await context.newPage();
  const policyViolations: string[] = [];
  const pageErrors: string[] = [];
  page.on("console", (message) => {
    if (message.type() === "error" && /Content Security Policy|Refused to/i.test(message.text()))
      policyViolations.push(`${message.text()} (${page.url()})`);
  });
  page.on("pageerror", (error) => pageErrors.push(error.message));
  await page.goto(`${env.apiUrl}/panel`);
  await page.getByLabel("Email").fill(account.email);
  await page.getByLabel("Password").fill(account.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL(/\/panel\/conversations/);
  return { context, page, policyViolations, pageErrors };
}

/**
 * The world of a conversations browser test: a test env with the simulator, a panel user's tenant
 * with one sender (its templates synced), and finalize, send and status workers running.
 */
export async function conversationWorld(options: {
  tenantName: string;
  phoneNumber: string;
  phoneNumberId: string;
  wabaId: string;
}) {
  const env = await createTestEnv({ simulator: true });
  const owner = await createPanelUserWithTenant(env.deps, { tenantName: options.tenantName });
  const sender = await addSender(env, owner.tenant.id, {
    ...options,
    name: options.tenantName,
    templates: true,
  });
  const workers: WorkerProcess[] = [
    spawnWorker(env, "finalize"),
    spawnWorker(env, "send"),
    spawnWorker(env, "status"),
  ];
  env.clock.set(new Date());
  let browser: Browser | undefined;
  return {
    env,
    owner,
    sender,
    /** Chromium, signed in to the panel as the tenant's user (closed with the world). */
    async signIn(options: { timezoneId?: string; locale?: string } = {}): Promise<SignedInPage> {
      browser ??= await launchChromium();
      return signedInPage(browser, env, owner, options);
    },
    /** A customer of this tenant writes (through the simulator). */
    inbound: (from: string, text: string, name: string, timestamp?: number) =>
      customerWrites(env, options.phoneNumberId, {
        from: from.slice(1),
        type: "text",
        text,
        name,
        timestamp,
      }),
    contactIdOf: (phone: string) => contactIdOf(env, owner.tenant.id, phone),
    /** A reply to the contact that failed a minute ago: the number is not on WhatsApp. */
    failedReply: (contactId: string, text: string) =>
      insertOutbound(
        env,
        { tenantId: owner.tenant.id, sender },
        {
          contactId,
          text,
          status: "failed",
          failure: { code: "recipient_invalid", message: "The number is not on WhatsApp.", retryable: false },
          createdAt: new Date(Date.now() - 60_000),
        },
      ),
    /** Waits for the conversation's unread count, which the list reads, to be written. */
    unreadWritten: (contactId: string) =>
      eventually(async () => {
        const row = await env.deps.db
          .selectFrom("conversations")
          .select("unread")
          .where("contact_id", "=", contactId)
          .executeTakeFirst();
        return (row?.unread ?? 0) > 0;
      }, 15_000),
    async close() {
      await browser?.close();
      await Promise.all(workers.map((worker) => worker.stop()));
      await env.close();
    },
  };
}

export type ConversationWorld = Awaited<ReturnType<typeof conversationWorld>>;

/**
 * The shorthands both Conversations browser tests use, over the world and the signed-in page that
 * `current` gives (set in the file's beforeAll; the shorthands are made at its top level, before).
 */
export function pageShorthands(current: () => { world: ConversationWorld; page: Page }) {
  return {
    url: (path: string) => `${current().world.env.apiUrl}${path}`,
    shoot: (name: string) => shoot(current().page, name),
    inbound: (from: string, text: string, name: string, timestamp?: number) =>
      current().world.inbound(from, text, name, timestamp),
    contactIdOf: (phone: string) => current().world.contactIdOf(phone),
    tabTo: (selector: string, max?: number) => tabTo(current().page, selector, max),
  };
}
