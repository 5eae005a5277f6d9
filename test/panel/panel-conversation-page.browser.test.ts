import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import { chooseTemplate } from "../support/browser.ts";
import {
  type ConversationWorld,
  conversationWorld,
  focused,
  pageShorthands,
  type SignedInPage,
  WAIT,
} from "../support/conversation-browser.ts";
import { simulatorSends } from "../support/fixtures.ts";
import { eventually, type TestEnv } from "../support/index.ts";

/**
 * One conversation's page in a real headless Chromium, at 1280 and 390 px (issue 24): its sidebar
 * has the list's filters and search and keeps the open conversation; a free-text draft is kept when
 * the 24-hour window closes (with a note, the focus on it) and is back in the box when the customer
 * writes; a template with a media header is sent with a link, checked and previewed.
 * Screenshots land in test-results/screenshots/<name>-<width>.png.
 */
const PHONE_NUMBER_ID = "377000000002402";
const HAL = "+4915112402411"; // the reply to him failed
const IDA = "+4915112402412"; // wrote just now
const FAY = "+4915112402413"; // her window closes while a draft is typed
const GIA = "+4915112402414"; // likewise, and the draft is discarded

let env: TestEnv;
let world: ConversationWorld;
let signedIn: SignedInPage;
let page: Page;
let hal = "";
let ida = "";

const { url, shoot, inbound, contactIdOf, tabTo } = pageShorthands(() => ({ world, page }));
const sidebarRows = () => page.locator(".conversation-sidebar #conversation-list a.conversation-link");
const storedDraft = (contactId: string) =>
  page.evaluate((key) => sessionStorage.getItem(key), `panel-draft:${contactId}`);

/** A customer whose window closes a minute from now (by the api's clock), on their page. */
async function windowClosingSoon(phone: string, name: string): Promise<string> {
  const nowS = Math.floor(env.clock.now().getTime() / 1000);
  await inbound(phone, "Are you there?", name, nowS - 86_400 + 60);
  const contactId = await contactIdOf(phone);
  await page.goto(url(`/panel/conversations/${contactId}`));
  await page.locator("#reply-body").waitFor(WAIT);
  return contactId;
}

beforeAll(async () => {
  world = await conversationWorld({
    tenantName: "Issue 24 Helmets",
    phoneNumber: "+15550124002",
    phoneNumberId: PHONE_NUMBER_ID,
    wabaId: "477000000002402",
  });
  ({ env } = world);

  await inbound(HAL, "Can you fix my visor?", "Hal Hartley", Math.floor(Date.now() / 1000) - 600);
  hal = await contactIdOf(HAL);
  await world.failedReply(hal, "Yes, bring it in.");
  await inbound(IDA, "Do you sell kids' helmets?", "Ida Lupino");
  ida = await contactIdOf(IDA);
  // The conversation summary is written with the message; wait for it, as the list reads it.
  await world.unreadWritten(ida);

  signedIn = await world.signIn();
  page = signedIn.page;
});

afterAll(() => world?.close());

describe("issue 24: a conversation's page in a browser", () => {
  test("the sidebar filters and searches like the list, and keeps the open conversation", async () => {
    await page.goto(url(`/panel/conversations/${ida}`));
    const sidebar = page.locator(".conversation-sidebar");
    await sidebar.locator("#conversation-list").waitFor(WAIT);
    expect(await sidebarRows().count()).toBe(2);

    // Failed: Hal matches; Ida is open, so she stays, marked; the conversation stays Ida's.
    await sidebar
      .getByRole("navigation", { name: "Filter conversations" })
      .getByRole("link", { name: "Failed" })
      .click();
    await page.waitForURL(/filter=failed/);
    expect(new URL(page.url()).pathname).toBe(`/panel/conversations/${ida}`);
    expect(await page.locator("h1").textContent()).toBe("Ida Lupino");
    expect(await sidebar.locator("#filter-failed").getAttribute("aria-current")).toBe("page");
    expect(await sidebarRows().count()).toBe(2);
    const idaRow = sidebar.locator(`#conversation-${ida}`);
    expect(await idaRow.getAttribute("aria-current")).toBe("page");
    expect(await idaRow.locator(".pinned-note").textContent()).toBe("shown because it is open");
    expect(await sidebar.locator(`#conversation-${hal} .failed-marker`).isVisible()).toBe(true);
    await shoot("sidebar-failed");

    // Search within the filter (Enter submits): the search keeps the filter, the page stays Ida's.
    await sidebar.getByRole("searchbox", { name: "Search by name or phone number" }).fill("hartley");
    await page.keyboard.press("Enter");
    await page.waitForURL(/q=hartley/);
    expect(page.url()).toContain("filter=failed");
    expect(await page.locator("h1").textContent()).toBe("Ida Lupino");
    // Newest first, the open conversation in its place among them.
    expect(await sidebarRows().allTextContents()).toEqual([
      expect.stringContaining("Ida Lupino"),
      expect.stringContaining("Hal Hartley"),
    ]);

    // A poll later the sidebar is as it was: Ida still listed, still the current one.
    await page.waitForTimeout(3_500);
    expect(await idaRow.getAttribute("aria-current")).toBe("page");
    expect(await sidebarRows().count()).toBe(2);

    // Opening Hal from it keeps the narrowing; Hal matches it, so nothing is pinned.
    await sidebar.locator(`#conversation-${hal}`).click();
    await page.waitForURL((u) => u.pathname === `/panel/conversations/${hal}`);
    expect(page.url()).toContain("q=hartley");
    expect(await page.locator("h1").textContent()).toBe("Hal Hartley");
    expect(await sidebarRows().count()).toBe(1);
    expect(await sidebar.locator(".pinned-note").count()).toBe(0);
    await shoot("sidebar-search");

    // On a phone the sidebar gives way to the conversation; the way back keeps the narrowing.
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await sidebar.isVisible()).toBe(false);
    await page.getByRole("link", { name: "All conversations" }).click();
    await page.waitForURL((u) => u.pathname === "/panel/conversations");
    expect(page.url()).toContain("filter=failed");
    expect(await page.locator("#filter-failed").getAttribute("aria-current")).toBe("page");
    expect(await page.getByRole("searchbox", { name: "Search by name or phone number" }).inputValue()).toBe(
      "hartley",
    );
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  test("a free-text draft is kept when the window closes, and is back in the box when the customer writes", async () => {
    const fay = await windowClosingSoon(FAY, "Fay Wray");
    const draft = "Yes, we have it in M.\nShall I put one aside for you?";
    await page.locator("#reply-body").click();
    await page.keyboard.type(draft);

    // The window closes (the api's clock moves on); the next poll swaps the free-text box out.
    env.clock.advance(120);
    const note = page.locator("#reply-draft");
    await note.waitFor({ state: "visible", ...WAIT });
    expect(await page.locator("#reply-body").count()).toBe(0);
    expect(await page.locator("#reply-draft-text").textContent()).toBe(draft);
    expect(await note.textContent()).toContain(
      "It cannot be sent as free text until Fay Wray writes again; then it is back in the message box.",
    );
    // The focus was in the box: it moves to the note that says why the box went, not to the page.
    expect(await focused(page)).toBe("div#reply-draft");
    expect(await storedDraft(fay)).toBe(draft);
    expect(await page.locator("#reply-template").isVisible()).toBe(true);
    await shoot("draft-kept");

    // Kept across a reload of the page (per conversation, for this tab).
    await page.reload();
    await note.waitFor({ state: "visible", ...WAIT });
    expect(await page.locator("#reply-draft-text").textContent()).toBe(draft);

    // Fay writes: the box is back with the draft in it, and the focus (it was on the note) with it.
    await tabTo("#reply-draft-discard");
    await inbound(FAY, "Hello? Still there?", "Fay Wray");
    await page.locator("#reply-body").waitFor(WAIT);
    // panel.js puts the draft back once htmx has settled the new box (htmx:load, a moment later).
    await eventually(async () => (await page.locator("#reply-body").inputValue()) === draft, 5_000);
    expect(await page.locator("#reply-body").inputValue()).toBe(draft);
    expect(await focused(page)).toBe("textarea#reply-body");
    expect(await page.locator("#reply-draft").count()).toBe(0);
    expect(await storedDraft(fay)).toBeNull();
    await shoot("draft-restored");

    // Sent as free text; the box is empty afterwards, and nothing is kept.
    await page.locator("#reply-send").click();
    await page.locator("#thread", { hasText: "Shall I put one aside for you?" }).waitFor(WAIT);
    expect(await page.locator("#reply-body").inputValue()).toBe("");
    expect(await storedDraft(fay)).toBeNull();
  });

  test("at 390 px: a kept draft can be discarded with the keyboard, and the focus stays in the reply box", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const gia = await windowClosingSoon(GIA, "Gia Long");
    await page.locator("#reply-body").focus();
    await page.keyboard.type("We open at 10.");
    env.clock.advance(120);
    await page.locator("#reply-draft").waitFor({ state: "visible", ...WAIT });
    expect(await focused(page)).toBe("div#reply-draft");
    await shoot("draft-kept-phone");

    await page.keyboard.press("Tab");
    expect(await focused(page)).toBe("button#reply-draft-discard");
    await page.keyboard.press("Enter");
    expect(await page.locator("#reply-draft").isVisible()).toBe(false);
    expect(await focused(page)).toBe("p#reply-closed");
    expect(await storedDraft(gia)).toBeNull();
    await page.reload();
    await page.locator("#reply-template").waitFor(WAIT);
    expect(await page.locator("#reply-draft").isVisible()).toBe(false);
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  test("at 390 px: a template with a document header takes a checked https link, previews it and sends it", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(url(`/panel/conversations/${ida}`));
    await chooseTemplate(page, "invoice_ready (en)");
    const link = page.getByLabel("Document link (the header)");
    await link.waitFor(WAIT);
    const media = page.locator("#template-preview .template-media");
    expect(await media.textContent()).toContain("Document: add its link below");
    const outbound = async () =>
      (
        await env.deps.db
          .selectFrom("messages")
          .select("id")
          .where("contact_id", "=", ida)
          .where("direction", "=", "outbound")
          .execute()
      ).length;
    const before = await outbound();

    // Not https: the preview says so, and the browser does not send the form.
    await link.fill("http://files.example.com/invoices/INV-2041.pdf");
    expect(await media.textContent()).toContain("Document: the link must start with https://");
    expect(await media.getAttribute("class")).toContain("invalid");
    await page.getByLabel("Body {{1}}").fill("INV-2041");
    await page.locator("#reply-template-send").click();
    expect(await link.evaluate((input: HTMLInputElement) => input.validity.patternMismatch)).toBe(true);
    expect(await page.locator("#reply-error").count()).toBe(0);

    // https, but no public address: the panel refuses it at its input, with what was typed kept.
    await link.fill("https://127.0.0.1/invoice.pdf");
    await page.locator("#reply-template-send").click();
    const error = page.locator("#reply-error");
    await error.waitFor(WAIT);
    expect(await error.textContent()).toContain(
      "The document link must not be a private, loopback or link-local address",
    );
    expect(await page.locator("#reply-header-link").getAttribute("aria-invalid")).toBe("true");
    expect(await page.locator("#reply-header-link").inputValue()).toBe("https://127.0.0.1/invoice.pdf");
    expect(await page.getByLabel("Body {{1}}").inputValue()).toBe("INV-2041");
    expect(await outbound()).toBe(before);

    // A public link: the preview names the file and its host, and opens it; a file name replaces it.
    const address = "https://files.example.com/invoices/INV-2041.pdf";
    await page.locator("#reply-header-link").fill(address);
    expect(await media.textContent()).toContain("Document: INV-2041.pdf · files.example.com");
    const open = media.getByRole("link", { name: "Open the link in a new tab" });
    expect(await open.getAttribute("href")).toBe(address);
    await page.getByLabel("File name (optional)").fill("Invoice 2041.pdf");
    expect(await media.textContent()).toContain("Document: Invoice 2041.pdf · files.example.com");
    expect(await page.locator("#template-preview .template-body").textContent()).toBe(
      "Your invoice INV-2041 is ready.",
    );
    await shoot("media-header-template");

    await page.locator("#reply-template-send").click();
    await page.locator("#thread", { hasText: "Your invoice INV-2041 is ready." }).waitFor(WAIT);
    expect(await outbound()).toBe(before + 1);
    // The provider got the document by its link, with the file name.
    const sent = await eventually(async () => {
      const sends = await simulatorSends(env, PHONE_NUMBER_ID);
      return sends.map((send) => JSON.stringify(send.payload)).find((text) => text.includes(address));
    }, 15_000);
    expect(sent).toContain('"filename":"Invoice 2041.pdf"');
    expect(sent).toContain('"type":"document"');
    await shoot("media-header-sent");
    await page.setViewportSize({ width: 1280, height: 860 });
  });

  test("no inline script or style was blocked, and no script failed", () => {
    expect(signedIn.policyViolations).toEqual([]);
    expect(signedIn.pageErrors).toEqual([]);
  });
});
