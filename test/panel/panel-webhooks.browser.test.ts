import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import { createApplication } from "../../src/applications/service.ts";
import { createWebhookEndpoint, endpointDeps } from "../../src/push/service.ts";
import { sendTestEvent } from "../../src/push/test-event.ts";
import {
  type ConversationWorld,
  conversationWorld,
  pageShorthands,
  type SignedInPage,
  WAIT,
} from "../support/conversation-browser.ts";
import { ORDER_SHIPPED, postMessage } from "../support/fixtures.ts";
import { call, eventually, getToken, type TestEnv } from "../support/index.ts";

/**
 * Issue 42 item 13 in a real headless Chromium: the Webhooks page with five endpoints stays short at
 * 1280 px (each endpoint collapsed to its URL, state and lag; opened by keyboard), and the
 * conversations list marks a last message that was canceled, or is scheduled, as the thread does.
 * Screenshots land in test-results/screenshots/<name>-<width>.png.
 */
const PHONE_NUMBER_ID = "377000000004201";
const CANCELED_TO = "+4915112404201";
const SCHEDULED_TO = "+4915112404202";
const CUSTOMER = "+4915112404203";
/** The most the page may be at 1280 px with five endpoints (it was 8,400 px). */
const MAX_PAGE_HEIGHT = 2_500;

let env: TestEnv;
let world: ConversationWorld;
let signedIn: SignedInPage;
let page: Page;
let receiver: ReturnType<typeof Bun.serve>;
const endpointIds: string[] = [];
let canceledId = "";
let scheduledId = "";
/** An API token of the tenant. */
let token = "";

const { url, shoot, inbound, contactIdOf, tabTo } = pageShorthands(() => ({ world, page }));

beforeAll(async () => {
  world = await conversationWorld({
    tenantName: "Issue 42 Hooks",
    phoneNumber: "+15550142001",
    phoneNumberId: PHONE_NUMBER_ID,
    wabaId: "477000000004201",
  });
  env = world.env;
  const tenantId = world.owner.tenant.id;

  // Five endpoints with a few deliveries each (test events; the fourth receiver fails), then events
  // that nobody delivers (no webhook worker runs): each endpoint has a lag to show.
  receiver = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (request) =>
      new URL(request.url).pathname.endsWith("/4")
        ? new Response("maintenance", { status: 503 })
        : new Response(null, { status: 204 }),
  });
  for (const i of [1, 2, 3, 4, 5]) {
    const endpoint = await createWebhookEndpoint(endpointDeps(env.deps), tenantId, {
      url: `http://127.0.0.1:${receiver.port}/hooks/${i}`,
      description: `Receiver ${i}`,
    });
    endpointIds.push(endpoint.id);
    for (let n = 0; n < 4; n++) await sendTestEvent(env.deps, tenantId, endpoint.id);
  }
  // What delivery records of a failing receiver (test events are not deliveries of the log).
  await env.deps.db
    .updateTable("webhook_endpoints")
    .set({
      last_failure_at: new Date(),
      last_failure_status: 503,
      last_failure_error: "HTTP 503: maintenance",
    })
    .where("id", "=", endpointIds[3]!)
    .execute();
  await inbound(CUSTOMER, "Is the workshop open on Sunday?", "Ida Pfeiffer");
  await contactIdOf(CUSTOMER);

  // Two scheduled sends through the API; one of them canceled.
  const { application, clientSecret } = await createApplication(env.deps.db, { tenantId, name: "Issue 42" });
  token = await getToken(env.app, application.clientId, clientSecret);
  const sendAt = Math.floor(env.clock.now().getTime() / 1000) + 86_400;
  const schedule = async (to: string) => {
    const sent = await postMessage(env.app, token, { to, template: ORDER_SHIPPED, send_at: sendAt });
    expect([sent.status, sent.body.status]).toEqual([201, "scheduled"]);
    return sent.body.id as string;
  };
  canceledId = await schedule(CANCELED_TO);
  scheduledId = await schedule(SCHEDULED_TO);
  const canceled = await call(env.app, "POST", `/v2/messages/${canceledId}/cancel`, { token });
  expect([canceled.status, canceled.body.status]).toEqual([200, "canceled"]);

  signedIn = await world.signIn();
  page = signedIn.page;
});

afterAll(async () => {
  await world?.close();
  await receiver?.stop(true);
});

describe("issue 42: the Webhooks page and the conversations list in a browser", () => {
  test("five endpoints at 1280 px: a short page, each collapsed to its URL, state and lag", async () => {
    await page.setViewportSize({ width: 1280, height: 860 });
    // Every endpoint has the events after it pending (nobody delivers them here).
    await eventually(async () => {
      const listed = await call(env.app, "GET", "/v2/webhook_endpoints", { token });
      const endpoints = listed.body.data as { delivery: { pending: number } }[];
      return endpoints.length === endpointIds.length && endpoints.every((e) => e.delivery.pending > 0);
    }, 15_000);
    await page.goto(url("/panel/webhooks"));
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    expect(height).toBeLessThan(MAX_PAGE_HEIGHT);

    for (const [index, id] of endpointIds.entries()) {
      const summary = page.locator(`#summary-${id}`);
      expect(await summary.isVisible()).toBe(true);
      expect(await page.locator(`#details-${id}`).evaluate((d) => (d as HTMLDetailsElement).open)).toBe(
        false,
      );
      const text = ((await summary.textContent()) ?? "").replace(/\s+/g, " ");
      expect(text).toContain(`/hooks/${index + 1}`);
      expect(text).toContain(index === 3 ? "Failing" : "Enabled");
      expect(text).toMatch(/\d+ pending, oldest \d+ s old/);
      // The facts and the deliveries are hidden until it is opened.
      expect(await page.locator(`section[id="${id}"] table.deliveries`).isVisible()).toBe(false);
    }
    await shoot("webhooks-five-endpoints");

    // Keyboard only: Tab to an endpoint's summary, Enter opens it, Space closes it again.
    const fourth = endpointIds[3]!;
    await tabTo(`#summary-${fourth}`);
    await page.keyboard.press("Enter");
    const deliveries = page.locator(`section[id="${fourth}"] table.deliveries`);
    await deliveries.waitFor({ state: "visible", ...WAIT });
    expect(await deliveries.locator("tbody tr").count()).toBe(4);
    expect(
      await page
        .locator(`section[id="${fourth}"]`)
        .getByRole("button", { name: /Send test event/ })
        .isVisible(),
    ).toBe(true);
    await shoot("webhooks-one-open");
    await page.keyboard.press("Space");
    await deliveries.waitFor({ state: "hidden", ...WAIT });

    // Named by the address (the way back from a new secret is /panel/webhooks#we_…): shown open.
    const second = endpointIds[1]!;
    await page.goto(url(`/panel/webhooks#${second}`));
    await page.locator(`section[id="${second}"] table.deliveries`).waitFor({ state: "visible", ...WAIT });
    expect(await page.locator("details.endpoint-details[open]").count()).toBe(1);
    expect(signedIn.policyViolations).toEqual([]);
    expect(signedIn.pageErrors).toEqual([]);
  });

  test("the conversations list marks a canceled last message, and a scheduled one, as the thread does", async () => {
    await page.goto(url("/panel/conversations"));
    const canceledRow = page.locator(`#conversation-${await contactIdOf(CANCELED_TO)}`);
    const scheduledRow = page.locator(`#conversation-${await contactIdOf(SCHEDULED_TO)}`);
    await canceledRow.waitFor(WAIT);

    const canceledBadge = canceledRow.locator('.message-status[data-status="canceled"]');
    expect(await canceledBadge.isVisible()).toBe(true);
    expect(await canceledBadge.textContent()).toBe("Status: Canceled");
    const strike = await canceledRow
      .locator(".preview-body")
      .evaluate((el) => getComputedStyle(el).textDecorationLine);
    expect(strike).toBe("line-through");

    const scheduledBadge = scheduledRow.locator('.message-status[data-status="scheduled"]');
    expect(await scheduledBadge.textContent()).toBe("Status: Scheduled");
    expect(await scheduledBadge.isVisible()).toBe(true);
    expect(await scheduledRow.locator('[data-status="canceled"]').count()).toBe(0);
    const plain = await scheduledRow
      .locator(".preview-body")
      .evaluate((el) => getComputedStyle(el).textDecorationLine);
    expect(plain).toBe("none");
    await shoot("list-canceled-scheduled");

    // The thread says the same of the canceled message.
    await canceledRow.click();
    const inThread = page.locator(`#message-${canceledId} .message-status`);
    await inThread.waitFor(WAIT);
    expect(await inThread.getAttribute("data-status")).toBe("canceled");
    expect(scheduledId).toStartWith("msg_");
    expect(signedIn.policyViolations).toEqual([]);
    expect(signedIn.pageErrors).toEqual([]);
  });
});
