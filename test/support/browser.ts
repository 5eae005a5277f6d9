import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { CHROMIUM_PATH } from "../../scripts/services.ts";

/** Where the browser tests leave screenshots of the main pages (README, "The web panel"). */
export const SCREENSHOT_DIR = join(import.meta.dir, "..", "..", "test-results", "screenshots");

/** Debian's Chromium, headless, with this machine's closed network in mind. */
export async function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
  });
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: true });
}

/**
 * Picks a template in a conversation's reply form by the `name (language)` its label shows (e.g.
 * "order_shipped (en)"), as a person chooses it from the list.
 */
export async function chooseTemplate(page: Page, template: string): Promise<void> {
  const option = page.locator("#reply-template option", { hasText: template });
  await page.locator("#reply-template").selectOption((await option.getAttribute("value")) ?? "");
}
