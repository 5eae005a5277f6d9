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
import { customerWrites, outboundMessages } from "../support/fixtures.ts";
import { eventually, type TestEnv } from "../support/index.ts";
import { insertOutbound } from "../support/reading.ts";

/**
 * Issue 24 in a real headless Chromium, at 1280 and 390 px: the conversations list's failed marker,
 * filters, search and unread title; a message's details (copyable id, timeline, local times); a
 * message waiting for a retry; starting a conversation with a template and its live preview; a
 * template whose values and focus survive the window opening; a keyboard-only template send.
 * Screenshots of each state land in test-results/screenshots/<name>-<width>.png. One conversation's page
 * (its sidebar's filters, a kept draft, a media header) is test/panel/panel-conversation-page.browser.test.ts.
 */
const PHONE_NUMBER_ID = "377000000002401";
const ADA = "+4915112402401";
const BRUNO = "+4915112402402";
const CHEN = "+4915112402403";
const DORA = "+4915112402404";
const NEW_CUSTOMER = "+4915112402405";
const EVE = "+4915112402406";
const ZONE = "Asia/Kolkata";
const LOCALE = "en-GB";

let env: TestEnv;
let world: ConversationWorld;
let owner: ConversationWorld["owner"];
let sender: ConversationWorld["sender"];
let signedIn: SignedInPage;
let page: Page;

const { url, shoot, inbound, contactIdOf, tabTo } = pageShorthands(() => ({ world, page }));

/** The local time Chromium should show for a UTC instant (the context's zone and locale). */
function localText(iso: string): string {
  return new Intl.DateTimeFormat(LOCALE, { dateStyle: "medium", timeStyle: "short", timeZone: ZONE }).format(
    new Date(iso),
  );
}

let ada = "";
let bruno = "";
let chen = "";
let retryId = "";

beforeAll(async () => {
  world = await conversationWorld({
    tenantName: "Issue 24 Bikes",
    phoneNumber: "+15550124001",
    phoneNumberId: PHONE_NUMBER_ID,
    wabaId: "477000000002401",
  });
  ({ env, owner, sender } = world);
  const nowS = Math.floor(Date.now() / 1000);

  // Bruno wrote two days ago (his window is closed); the reply to him failed.
  await inbound(BRUNO, "Do you repair e-bikes?", "Bruno Díaz", nowS - 2 * 86_400);
  bruno = await contactIdOf(BRUNO);
  const tenant = { tenantId: owner.tenant.id, sender };
  await world.failedReply(bruno, "Yes! Bring it by on Monday.");
  // Chen's message waits for its third attempt (the provider throttled the first two).
  await inbound(CHEN, "Is my bike ready?", "Chen Wei");
  chen = await contactIdOf(CHEN);
  retryId =
    (await insertOutbound(env, tenant, {
      contactId: chen,
      text: "Checking with the workshop now.",
      status: "accepted",
      createdAt: new Date(Date.now() - 30_000),
      retrying: {
        attempts: 2,
        // Far enough ahead that the running send worker leaves it alone during the test.
        notBefore: new Date(Date.now() + 3_600_000),
        lastError: {
          code: "provider_rate_limited",
          message: "WhatsApp throttled the send.",
          retryable: true,
        },
      },
    })) ?? "";
  // Ada wrote just now: unread, window open.
  await inbound(ADA, "Hello! Do you have a 54 cm frame?", "Ada Lovelace");
  ada = await contactIdOf(ADA);
  await world.unreadWritten(ada);

  signedIn = await world.signIn({ timezoneId: ZONE, locale: LOCALE });
  page = signedIn.page;
});

afterAll(() => world?.close());

describe("issue 24: the conversations panel in a browser", () => {
  test("the list: failed marker, unread count in the title, filters and search that keep polling", async () => {
    await page.goto(url("/panel/conversations"));
    const rows = page.locator("#conversation-list a.conversation-link");
    await rows.first().waitFor(WAIT);
    expect(await page.title()).toMatch(/^\(\d+\) Conversations · Messaging panel$/);
    const brunoRow = page.locator(`#conversation-${bruno}`);
    expect(await brunoRow.locator(".failed-marker").isVisible()).toBe(true);
    expect(await brunoRow.locator(".failed-marker").textContent()).toContain("Failed");
    expect(await page.locator(`#conversation-${ada} .failed-marker`).count()).toBe(0);
    await shoot("list");

    // Filters are links: Failed shows Bruno alone.
    await page
      .getByRole("navigation", { name: "Filter conversations" })
      .getByRole("link", { name: "Failed" })
      .click();
    await page.waitForURL(/filter=failed/);
    expect(await rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain("Bruno Díaz");
    expect(await page.locator("#filter-failed").getAttribute("aria-current")).toBe("page");
    await shoot("list-failed");

    await page.locator("#filter-open").click();
    await page.waitForURL(/filter=open/);
    const open = await rows.allTextContents();
    expect(open.some((text) => text.includes("Ada Lovelace"))).toBe(true);
    expect(open.some((text) => text.includes("Bruno"))).toBe(false);

    // Unread, then a new customer writes: the filtered list and the title follow without a reload.
    await page.locator("#filter-unread").click();
    await page.waitForURL(/filter=unread/);
    const before = Number(/^\((\d+)\)/.exec(await page.title())?.[1] ?? "0");
    await page.evaluate(() => {
      (window as unknown as { notReloaded: boolean }).notReloaded = true;
    });
    await inbound(DORA, "Can I book a test ride?", "Dora Maar");
    await page.locator("#conversation-list", { hasText: "Dora Maar" }).waitFor(WAIT);
    await eventually(
      async () => (await page.title()) === `(${before + 1}) Conversations · Messaging panel`,
      15_000,
    );
    expect(await page.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).toBe(
      true,
    );
    expect(page.url()).toContain("filter=unread");
    await shoot("list-unread");

    // Search by name and by phone, from the search box (Enter submits).
    await page.locator("#filter-all").click();
    await page.waitForURL(/\/panel\/conversations$/);
    await page.getByRole("searchbox", { name: "Search by name or phone number" }).fill("lovelace");
    await page.keyboard.press("Enter");
    await page.waitForURL(/q=lovelace/);
    expect(await rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain("Ada Lovelace");
    await shoot("list-search-name");
    await page.getByRole("searchbox", { name: "Search by name or phone number" }).fill("0151 12402403");
    await page.keyboard.press("Enter");
    await page.waitForURL(/q=0151/);
    expect(await rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain("Chen Wei");
    await shoot("list-search-phone");
  });

  test("a message waiting for a retry says so, with its last error linked to the docs", async () => {
    await page.goto(url(`/panel/conversations/${chen}`));
    const retrying = page.locator(`#message-${retryId} .message-retrying`);
    await retrying.waitFor(WAIT);
    const text = (await retrying.textContent()) ?? "";
    expect(text).toContain("Retrying: 2 attempts so far, next at");
    expect(text).toContain("Last error: WhatsApp throttled the send.");
    expect(await page.locator(`#message-${retryId} [data-status="retrying"]`).textContent()).toContain(
      "Retrying",
    );
    const link = retrying.getByRole("link", { name: "What provider_rate_limited means" });
    expect(await link.getAttribute("href")).toBe("/v2/docs#failure-provider_rate_limited");
    // The next attempt in local time, UTC on hover.
    const time = retrying.locator("time.local-time");
    const iso = (await time.getAttribute("datetime")) ?? "";
    expect(await time.textContent()).toBe(localText(iso));
    expect(await time.getAttribute("title")).toMatch(/ UTC$/);
    await shoot("retrying");

    await page.goto(url(`/panel/conversations/${bruno}`));
    const failure = page.locator(".message-failure").first();
    await failure.waitFor(WAIT);
    expect(await failure.getByRole("link").getAttribute("href")).toBe("/v2/docs#failure-recipient_invalid");
    await shoot("failed-message");
  });

  test("start a conversation with a phone number and a template, with a live preview", async () => {
    await page.goto(url("/panel/conversations"));
    await page.getByRole("link", { name: "New conversation" }).click();
    await page.waitForURL(/\/panel\/conversations\/new/);
    await chooseTemplate(page, "order_shipped (en)");
    const first = page.locator("#template-fields input[name='body.1']");
    await first.waitFor(WAIT);
    const preview = page.locator("#template-preview .template-body");
    expect(await preview.textContent()).toContain("{{1}}");
    await first.pressSequentially("Grace");
    expect(await preview.textContent()).toContain("Hi Grace,");
    expect(await preview.textContent()).toContain("{{2}}");
    await page.locator("#template-fields input[name='body.2']").fill("#4711");
    expect(await preview.textContent()).toBe("Hi Grace, your order #4711 has shipped.");
    expect(await page.locator("#template-preview mark.filled").count()).toBe(2);
    await page.getByLabel("Phone number").fill("+49 151 12402405");
    await shoot("new-conversation");

    await page.getByRole("button", { name: "Send template" }).click();
    await page.waitForURL(/\/panel\/conversations\/ctc_/);
    const contactId = await contactIdOf(NEW_CUSTOMER);
    expect(page.url()).toContain(contactId);
    await page.locator("#thread", { hasText: "Hi Grace, your order #4711 has shipped." }).waitFor(WAIT);
    await shoot("new-conversation-sent");
  });

  test("a message's details: template, copyable id, status timeline in local time", async () => {
    const contactId = await contactIdOf(NEW_CUSTOMER);
    const message = await env.deps.db
      .selectFrom("messages")
      .select("id")
      .where("contact_id", "=", contactId)
      .executeTakeFirstOrThrow();
    const id = message.id ?? "";
    // The simulator reports sent, delivered and read; wait until the event log has them.
    await eventually(async () => {
      const events = await env.deps.db
        .selectFrom("events")
        .select("type")
        .where("message_id", "=", id)
        .execute();
      return events.some((event) => event.type === "message.read");
    }, 20_000);
    await page.goto(url(`/panel/conversations/${contactId}`));
    const item = page.locator(`#message-${id}`);
    await item.waitFor(WAIT);
    // The message's own time, in local time with UTC on hover.
    const meta = item.locator(".message-meta time.local-time");
    const iso = (await meta.getAttribute("datetime")) ?? "";
    expect(await meta.textContent()).toBe(localText(iso));
    expect(await meta.getAttribute("title")).toBe(`${iso.replace("T", " ").slice(0, 16)} UTC`);

    await item.getByText("Details").click();
    const timeline = item.locator("ol.timeline");
    await timeline.waitFor(WAIT);
    const steps = await timeline.locator(".step").allTextContents();
    expect(steps).toEqual(["Accepted", "Sent", "Delivered", "Read"]);
    for (const time of await timeline.locator("time.local-time").all()) {
      expect(await time.textContent()).toBe(localText((await time.getAttribute("datetime")) ?? ""));
    }
    expect(await item.locator(".message-facts").textContent()).toContain("order_shipped");
    expect(await item.locator(".message-facts").textContent()).toContain("(en)");

    // Copy the id with the keyboard: focus the button, Enter.
    await item.getByRole("button", { name: "Copy id" }).focus();
    await page.keyboard.press("Enter");
    await item.getByRole("button", { name: "Copied" }).waitFor(WAIT);
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(id);
    await shoot("message-details");

    // A poll that redraws the thread keeps the details open (and loads the timeline again).
    await inbound(NEW_CUSTOMER, "Thanks, got it!", "Grace");
    await page.locator("#thread", { hasText: "Thanks, got it!" }).waitFor(WAIT);
    await item.locator("ol.timeline").waitFor(WAIT);
    expect(await item.locator("details.message-details").getAttribute("open")).not.toBeNull();
  });

  test("a template being filled in keeps its values and focus when the window opens", async () => {
    await page.goto(url(`/panel/conversations/${bruno}`));
    await page.locator("#reply-template").waitFor(WAIT);
    expect(await page.locator("#reply-body").count()).toBe(0);
    await chooseTemplate(page, "order_shipped (en)");
    const first = page.locator("#template-fields input[name='body.1']");
    await first.waitFor(WAIT);
    await first.fill("Bruno");
    const second = page.locator("#template-fields input[name='body.2']");
    await second.click();
    await second.pressSequentially("#88");
    await shoot("window-closed-template");

    // Bruno writes: the window opens, the free-text box appears; the template stays as typed.
    await inbound(BRUNO, "Are you open on Saturday?", "Bruno Díaz");
    await page.locator("#reply-body").waitFor(WAIT);
    expect(await first.inputValue()).toBe("Bruno");
    expect(await second.inputValue()).toBe("#88");
    expect(await page.evaluate(() => document.activeElement?.getAttribute("name"))).toBe("body.2");
    await page.keyboard.type("9");
    expect(await second.inputValue()).toBe("#889");
    expect(await page.locator("#template-preview .template-body").textContent()).toBe(
      "Hi Bruno, your order #889 has shipped.",
    );
    await shoot("window-opened-template-kept");
  });

  test("keyboard only: choose a template, fill it in, send it", async () => {
    await page.goto(url(`/panel/conversations/${ada}`));
    await page.locator("#reply-template").waitFor(WAIT);
    const before = await outboundMessages(env.deps.db, ada);
    const template = await env.deps.db
      .selectFrom("templates")
      .select("id")
      .where("sender_id", "=", sender.id)
      .where("name", "=", "order_shipped")
      .where("language", "=", "en")
      .executeTakeFirstOrThrow();
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await tabTo("#reply-template");
    const picker = page.locator("#reply-template");
    expect(await picker.inputValue()).toBe("");
    expect(await page.locator("#template-fields input").count()).toBe(0);
    // The template is picked by typing the start of its name on the closed select (type-ahead, as
    // every browser's select takes it, without opening its list or counting options); the select's
    // change has htmx load the variables. Typing picks nothing if the name does not lead an option.
    await page.keyboard.type("order_shipped (en");
    expect(await picker.inputValue()).toBe(template.id);
    expect(await picker.locator("option:checked").textContent()).toBe("order_shipped (en) · utility");
    await page.locator("#template-fields legend", { hasText: "order_shipped (en)" }).waitFor(WAIT);
    // The focus stayed on the picker while its variables were loaded.
    expect(await focused(page)).toBe("select#reply-template");
    await tabTo("#template-fields input[name='body.1']");
    await page.keyboard.type("Ada");
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.getAttribute("name"))).toBe("body.2");
    await page.keyboard.type("#54");
    expect(await page.locator("#template-preview .template-body").textContent()).toBe(
      "Hi Ada, your order #54 has shipped.",
    );
    await tabTo("#reply-template-send");
    await shoot("keyboard-template");
    await page.keyboard.press("Enter");
    await page.locator("#thread", { hasText: "Hi Ada, your order #54 has shipped." }).waitFor(WAIT);
    const after = await outboundMessages(env.deps.db, ada);
    expect(after).toHaveLength(before.length + 1);
    // After sending, the focus is back in the template picker, ready for another.
    await eventually(
      async () => (await page.evaluate(() => document.activeElement?.id)) === "reply-template",
      5_000,
    );
  });

  test("a received picture shows as a thumbnail that loads; a received document is a download", async () => {
    for (const fields of [
      { type: "image", caption: "The scratch on the frame" },
      { type: "document", filename: "invoice.pdf" },
    ] as const) {
      await customerWrites(env, PHONE_NUMBER_ID, { from: EVE.slice(1), name: "Eve Media", ...fields });
    }
    const eve = await contactIdOf(EVE);
    await eventually(async () => {
      const row = await env.deps.db
        .selectFrom("messages")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("contact_id", "=", eve)
        .executeTakeFirstOrThrow();
      return Number(row.n) === 2;
    }, 15_000);
    await page.goto(url(`/panel/conversations/${eve}`));
    const image = page.getByRole("img", { name: "Image from Eve Media" });
    await image.waitFor(WAIT);
    await image.scrollIntoViewIfNeeded();
    await eventually(
      async () =>
        (await image.evaluate((img: HTMLImageElement) => (img.complete ? img.naturalWidth : 0))) > 0,
      15_000,
    );
    const download = page.getByRole("link", { name: "Download invoice.pdf" });
    expect(await download.isVisible()).toBe(true);
    const [file] = await Promise.all([page.waitForEvent("download"), download.click()]);
    expect(file.suggestedFilename()).toBe("invoice.pdf");
    await shoot("inbound-media");
  });

  test("no inline script or style was blocked, and no script failed", () => {
    expect(signedIn.policyViolations).toEqual([]);
    expect(signedIn.pageErrors).toEqual([]);
  });
});
