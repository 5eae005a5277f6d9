/**
 * Issue 23, first part (DESIGN §13): GET /v2/messages/{id}, and `client_reference` stored with a send
 * and echoed on the Message, history, the feed, a conversation's last message and the events.
 */
import { describe, expect, test } from "bun:test";
import { sequenceFeed } from "../../src/feed/sequencer.ts";
import { finalizeInbound } from "../../src/inbound/finalize.ts";
import { customerWrites, ORDER_SHIPPED, postMessage } from "../support/fixtures.ts";
import { call, deliverOne } from "../support/index.ts";
import { useWorld } from "../support/world.ts";

// The simulator's own statuses never come within a test: the test posts them.
const world = useWorld({ env: { simulator: true, statusDelayMs: 600_000 }, shop: { templates: true } });

const send = (body: Record<string, unknown>, key?: string) =>
  postMessage(world.env.app, world.shop.token, body, { key });
const get = (id: string, as = world.shop.token) =>
  call(world.env.app, "GET", `/v2/messages/${id}`, { token: as });

describe("client_reference", () => {
  test("stored and echoed by POST, a replay, GET, history, the feed, the conversation and the events", async () => {
    const accepted = await send(
      { to: "+4915100099001", template: ORDER_SHIPPED, client_reference: "order A-1001/7" },
      "ref-1",
    );
    expect(accepted.status).toBe(201);
    expect(accepted.body).toMatchObject({
      client_reference: "order A-1001/7",
      send_at: null,
      valid_for: null,
      failure: null,
    });
    const id: string = accepted.body.id;
    const contactId: string = accepted.body.to.id;

    const replay = await send(
      { to: "+4915100099001", template: ORDER_SHIPPED, client_reference: "order A-1001/7" },
      "ref-1",
    );
    expect(replay.status).toBe(200);
    expect(replay.body).toEqual(accepted.body);
    // Another reference under the same key is another request.
    const reused = await send(
      { to: "+4915100099001", template: ORDER_SHIPPED, client_reference: "other" },
      "ref-1",
    );
    expect(reused.status).toBe(400);
    expect(reused.body.error.code).toBe("idempotency_key_reused");

    expect(await deliverOne(world.env.deps, id)).toBe("sent");
    await sequenceFeed(world.env.deps.db);
    const history = await call(world.env.app, "GET", `/v2/contacts/${contactId}/messages`, {
      token: world.shop.token,
    });
    expect(history.body.data.find((m: { id: string }) => m.id === id).client_reference).toBe(
      "order A-1001/7",
    );
    const feed = await call(world.env.app, "GET", "/v2/messages?limit=500", { token: world.shop.token });
    expect(feed.body.data.find((m: { id: string }) => m.id === id).client_reference).toBe("order A-1001/7");
    const conversations = await call(world.env.app, "GET", "/v2/conversations", { token: world.shop.token });
    const conversation = conversations.body.data.find(
      (c: { contact: { id: string } }) => c.contact.id === contactId,
    );
    expect(conversation.last_message.client_reference).toBe("order A-1001/7");
    const events = await call(world.env.app, "GET", "/v2/events?types=message.sent", {
      token: world.shop.token,
    });
    const sent = events.body.data.find((e: { data: { id: string } }) => e.data.id === id);
    expect(sent.data.client_reference).toBe("order A-1001/7");
  });

  test("1-128 printable ASCII characters; anything else is 400 parameter_invalid, param client_reference", async () => {
    expect(
      (await send({ to: "+4915100099002", template: ORDER_SHIPPED, client_reference: "x".repeat(128) }))
        .status,
    ).toBe(201);
    for (const bad of ["", "x".repeat(129), "café", "line\nbreak", "tab\there", 42]) {
      const refused = await send({ to: "+4915100099002", template: ORDER_SHIPPED, client_reference: bad });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ code: "parameter_invalid", param: "client_reference" });
    }
    const none = await send({ to: "+4915100099002", template: ORDER_SHIPPED });
    expect(none.body.client_reference).toBe(null);
  });

  test("a non-ASCII client_reference is told it must be printable ASCII (not a length), single and batch", async () => {
    for (const bad of ["café", "tab\there", "😀"]) {
      const single = await send({ to: "+4915100099004", template: ORDER_SHIPPED, client_reference: bad });
      expect(single.status).toBe(400);
      expect(single.body.error).toMatchObject({ code: "parameter_invalid", param: "client_reference" });
      expect(single.body.error.message).toContain("printable ASCII");
      expect(single.body.error.message).not.toMatch(/1 to 128 characters|expected a string/);

      const batch = await call(world.env.app, "POST", "/v2/messages/batch", {
        token: world.shop.token,
        body: { messages: [{ to: "+4915100099004", template: ORDER_SHIPPED, client_reference: bad }] },
      });
      expect(batch.status).toBe(200);
      expect(batch.body.data[0].status).toBe(400);
      expect(batch.body.data[0].error).toMatchObject({
        code: "parameter_invalid",
        param: "client_reference",
      });
      expect(batch.body.data[0].error.message).toBe(single.body.error.message);
    }
    // Too long is still a length error.
    const long = await send({
      to: "+4915100099004",
      template: ORDER_SHIPPED,
      client_reference: "x".repeat(129),
    });
    expect(long.body.error.message).toContain("128 characters");
  });
});

describe("GET /v2/messages/{id}", () => {
  test("the Message as POST returned it, with its current status", async () => {
    const accepted = await send({ to: "+4915100099003", template: ORDER_SHIPPED, client_reference: "r-3" });
    const id: string = accepted.body.id;
    const fresh = await get(id);
    expect(fresh.status).toBe(200);
    expect(fresh.body).toEqual(accepted.body);
    expect(await deliverOne(world.env.deps, id)).toBe("sent");
    const later = await get(id);
    expect(later.body).toEqual({ ...accepted.body, status: "sent" });
  });

  test("a failed send shows its failure", async () => {
    // A sandbox recipient the simulator fails with Graph error 190 (provider_auth_failed).
    const accepted = await send({ to: "+15550001006", template: ORDER_SHIPPED });
    expect(await deliverOne(world.env.deps, accepted.body.id)).toBe("failed");
    const failed = await get(accepted.body.id);
    expect(failed.body).toMatchObject({
      status: "failed",
      failure: { code: "provider_auth_failed", retryable: false },
    });
  });

  test("an inbound message too: direction inbound, no status, its text", async () => {
    const providerId = await customerWrites(world.env, world.shop.sender.provider_phone_number_id, {
      from: "4915100099004",
      type: "text",
      text: "hello?",
    });
    const outcome = await finalizeInbound(world.env.deps.db, world.env.clock, providerId);
    const found = await get(outcome?.messageId ?? "");
    expect(found.status).toBe(200);
    expect(found.body).toMatchObject({
      object: "message",
      id: outcome?.messageId,
      direction: "inbound",
      status: null,
      sender: world.shop.sender.id,
      to: { object: "contact", phone: "+4915100099004" },
      content: { kind: "text", preview: "hello?" },
      client_reference: null,
      failure: null,
    });
  });

  test("an unknown id, or another tenant's, is 404 resource_missing", async () => {
    const accepted = await send({ to: "+4915100099005", template: ORDER_SHIPPED });
    for (const response of [
      await get(accepted.body.id, world.other.token),
      await get("msg_doesnotexist"),
      await get("x"),
    ]) {
      expect(response.status).toBe(404);
      expect(response.body.error).toMatchObject({ code: "resource_missing", param: "message_id" });
    }
  });
});
