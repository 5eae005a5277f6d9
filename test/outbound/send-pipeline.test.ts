import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sql } from "kysely";
import { systemClock } from "../../src/clock.ts";
import { sweep } from "../../src/maintenance/sweeper.ts";
import { CALLS_IN_FLIGHT } from "../../src/outbound/pacing.ts";
import { deliverBatch } from "../../src/outbound/send.ts";
import type { SenderRow } from "../../src/senders/repository.ts";
import { createShop, freshPhone, postMessage, type Shop, simulatorSends } from "../support/fixtures.ts";
import {
  createTestEnv,
  eventually,
  spawnWorker,
  type TestEnv,
  type WorkerProcess,
} from "../support/index.ts";

/**
 * The batch send pipeline (issue 13, parts 1, 3 and 7): one job sends many messages, each with
 * its own outcome; a sender's pace holds across worker processes; sends to one contact keep their
 * acceptance order through retries without holding up anyone else.
 */
let env: TestEnv;
let shops = 0;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, statusDelayMs: 600_000 });
});
afterAll(() => env.close());

/** A tenant of its own, its sender paced at `mps` (default 80). */
function shop(mps?: number): Promise<Shop> {
  return createShop(env, `Shop ${++shops}`, { sendLimit: 10_000, mps, templates: true });
}

async function accept(
  owner: Shop,
  to: string,
  tag: string,
  extra: { valid_for?: number } = {},
): Promise<string> {
  const template = { name: "order_shipped", language: "en", variables: { body: ["Ada", tag] } };
  const result = await postMessage(env.app, owner.token, { to, template, ...extra });
  expect(result.status).toBe(201);
  return result.body.id;
}

async function control(path: string, body: unknown): Promise<void> {
  const response = await fetch(`${env.simulatorUrl}/_sim/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(200);
}

/** What the simulator took for one sender, in the order it took it: our message ids. */
async function sentBy(sender: SenderRow): Promise<{ messageId: string; to: string }[]> {
  const sends = await simulatorSends(env, sender.provider_phone_number_id);
  return sends.map((send) => ({
    messageId: send.payload.biz_opaque_callback_data ?? "",
    to: send.payload.to ?? "",
  }));
}

async function rows(ids: string[]) {
  return env.deps.db
    .selectFrom("messages")
    .select([
      "id",
      "seq",
      "status",
      "failure",
      "provider_message_id",
      "send_attempts",
      "send_throttled",
      "send_started_at",
      "send_not_before",
    ])
    .where("id", "in", ids)
    .orderBy("seq")
    .execute();
}

describe("a batch", () => {
  test("a message that waits for its sender's tokens past the in-doubt window is not sent twice", async () => {
    const owner = await shop(5);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await accept(owner, freshPhone(), `#w${i}`));
    // A short in-doubt window: messages still waiting for tokens in the first worker look, to a
    // second worker, like attempts that never reached the provider.
    const deps = {
      ...env.deps,
      clock: systemClock,
      config: { ...env.deps.config, workers: { ...env.deps.config.workers, sendInDoubtMs: 1000 } },
    };
    const first = deliverBatch(deps, ids);
    await Bun.sleep(1500);
    const second = deliverBatch(deps, ids);
    await Promise.all([first, second]);
    const sent = (await sentBy(owner.sender)).map((s) => s.messageId);
    expect(sent.length).toBe(new Set(sent).size);
    expect(new Set(sent)).toEqual(new Set(ids));
  });

  test("one permanent and one retryable provider failure among successes: each its own outcome", async () => {
    const owner = await shop();
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push(await accept(owner, freshPhone(), `#${i}`));
    // The first two sends to reach the provider fail: one for good, one for now.
    await control("fail-next", { count: 1, code: 131026 });
    await control("fail-next", { count: 1, code: 131000 });
    const deps = { ...env.deps, clock: systemClock };

    const report = await deliverBatch(deps, ids);
    const outcomes = [...report.outcomes.values()];
    expect(outcomes.filter((o) => o === "sent")).toHaveLength(8);
    expect(outcomes.filter((o) => o === "failed")).toHaveLength(1);
    expect(outcomes.filter((o) => o === "retry")).toHaveLength(1);
    const after = await rows(ids);
    const failed = after.filter((r) => r.status === "failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]!.failure).toMatchObject({ code: "recipient_invalid", retryable: false });
    expect(failed[0]!.send_attempts).toBe(1);
    const waiting = after.filter((r) => r.status === "accepted");
    expect(waiting).toHaveLength(1);
    expect(waiting[0]).toMatchObject({ send_attempts: 1, send_started_at: null, provider_message_id: null });
    expect(waiting[0]!.send_not_before).not.toBeNull();
    expect(report.later.map((l) => l.messageId)).toEqual([waiting[0]!.id!]);
    expect(after.filter((r) => r.status === "sent" && r.send_attempts === 1)).toHaveLength(8);

    // Not due yet: a job for it now sends nothing.
    expect((await deliverBatch(deps, [waiting[0]!.id!])).outcomes.get(waiting[0]!.id!)).toBe("retry");
    await Bun.sleep(Math.max(0, report.later[0]!.dueAt - Date.now()) + 20);
    const retried = await deliverBatch(deps, [waiting[0]!.id!]);
    expect(retried.outcomes.get(waiting[0]!.id!)).toBe("sent");
    const [final] = await rows([waiting[0]!.id!]);
    expect(final).toMatchObject({ status: "sent", send_attempts: 2, failure: null });

    // Each message reached the provider once at most: nine sent, the failed one never.
    const sent = await sentBy(owner.sender);
    expect(sent.map((s) => s.messageId).sort()).toEqual(ids.filter((id) => id !== failed[0]!.id).sort());
  });

  test("a message whose valid_for ends while the calls ahead of it are at a slow provider fails expired, never sent late", async () => {
    const owner = await shop(1000);
    // One more than a chunk's calls in flight, each valid for 3 s: the last waits for a place.
    const ids = await Promise.all(
      Array.from({ length: CALLS_IN_FLIGHT + 1 }, (_, i) =>
        accept(owner, freshPhone(), `#v${i}`, { valid_for: 3 }),
      ),
    );
    // The provider holds the first calls 5 s: a message behind them starts past its valid_for.
    await control("slow-next", { count: CALLS_IN_FLIGHT, delay_ms: 5000 });
    try {
      const report = await deliverBatch({ ...env.deps, clock: systemClock }, ids);
      const received = new Map(
        (await simulatorSends(env, owner.sender.provider_phone_number_id)).map((send) => [
          send.payload.biz_opaque_callback_data ?? "",
          Date.parse(send.received_at),
        ]),
      );
      const stored = await env.deps.db
        .selectFrom("messages")
        .select(["id", "status", "failure", "expires_at"])
        .where("id", "in", ids)
        .execute();
      const expired = stored.filter((row) => row.status === "failed" && row.failure?.code === "expired");
      expect(expired.length).toBeGreaterThanOrEqual(1);
      for (const row of expired) {
        expect(report.outcomes.get(row.id ?? "")).toBe("failed");
        expect(received.has(row.id ?? "")).toBe(false);
      }
      // Every other one reached the provider before its valid_for ended (a call's way across the machine allowed).
      const sent = stored.filter((row) => !expired.includes(row));
      expect(sent.length + expired.length).toBe(ids.length);
      for (const row of sent)
        expect(received.get(row.id ?? "")!).toBeLessThan(row.expires_at!.getTime() + 500);
    } finally {
      await control("reset", {});
    }
  }, 60_000);
});

describe("pacing (real worker processes)", () => {
  test("SIMULATOR_MPS=20 and a sender limit of 20: 200 sends take >= 9 s, none fails for throughput", async () => {
    const owner = await shop(20);
    await control("mps", { mps: 20 });
    const workers: WorkerProcess[] = [spawnWorker(env, "send"), spawnWorker(env, "send")];
    try {
      // Both workers up before the clock starts (a cold start is not pacing).
      await Bun.sleep(1500);
      const started = Date.now();
      const ids = await Promise.all(
        Array.from({ length: 200 }, (_, i) => accept(owner, freshPhone(), `#p${i}`)),
      );
      await eventually(async () => (await rows(ids)).every((r) => r.provider_message_id !== null), 60_000);
      const elapsed = Date.now() - started;
      expect(elapsed).toBeGreaterThanOrEqual(9000);
      const final = await rows(ids);
      expect(final.filter((r) => r.failure !== null)).toHaveLength(0);
      // The bucket kept the workers under the provider's limit: hardly any send was refused as
      // throttled (without it, every send beyond the first second's 20 would have been).
      const throttled = final.reduce((sum, r) => sum + r.send_throttled, 0);
      expect(throttled).toBeLessThan(20);
      expect(await sentBy(owner.sender)).toHaveLength(200);
    } finally {
      await control("mps", { mps: 0 });
      await Promise.all(workers.map((w) => w.stop()));
    }
  }, 90_000);
});

describe("per-recipient order (real worker processes)", () => {
  test("50 sends to one contact reach the provider in acceptance order through retries; another contact is not held up", async () => {
    const owner = await shop(1000);
    const alice = freshPhone();
    const bob = freshPhone();
    // Alice's first message failed retryably, and its retry is far off (as a worker records it).
    const first = await accept(owner, alice, "#a0");
    await env.deps.db
      .updateTable("messages")
      .set({ send_attempts: 1, send_not_before: new Date(Date.now() + 600_000) })
      .where("id", "=", first)
      .execute();
    const workers: WorkerProcess[] = [
      spawnWorker(env, "send", { SEND_RETRY_BASE_MS: "200" }),
      spawnWorker(env, "send", { SEND_RETRY_BASE_MS: "200" }),
    ];
    try {
      // Meanwhile 49 more to Alice and 10 to Bob, all at once.
      const sends = await Promise.all([
        ...Array.from({ length: 49 }, (_, i) =>
          accept(owner, alice, `#a${i + 1}`).then((id) => ({ id, to: alice })),
        ),
        ...Array.from({ length: 10 }, (_, i) => accept(owner, bob, `#b${i}`).then((id) => ({ id, to: bob }))),
      ]);
      const aliceIds = [first, ...sends.filter((s) => s.to === alice).map((s) => s.id)];
      const bobIds = sends.filter((s) => s.to === bob).map((s) => s.id);
      // Bob's go out while Alice's wait behind her first.
      await eventually(async () => (await rows(bobIds)).every((r) => r.provider_message_id !== null), 20_000);
      await Bun.sleep(500);
      expect((await rows(aliceIds)).filter((r) => r.provider_message_id !== null)).toHaveLength(0);

      // The retry falls due (the sweeper nudges it); each send takes 20 ms, and retryable failures
      // land in between Alice's sends.
      await control("slow-next", { count: 60, delay_ms: 20 });
      await env.deps.db
        .updateTable("messages")
        .set({ send_not_before: new Date() })
        .where("id", "=", first)
        .execute();
      await sweep({ ...env.deps, clock: systemClock }, 0);
      const sentCount = async () =>
        (await rows(aliceIds)).filter((r) => r.provider_message_id !== null).length;
      for (const reached of [10, 25, 40]) {
        await eventually(async () => (await sentCount()) >= reached, 20_000);
        await control("fail-next", { count: 1, code: 131000 });
      }
      await eventually(async () => (await sentCount()) === 50, 60_000);

      const accepted = (await rows(aliceIds)).map((r) => r.id);
      const received = (await sentBy(owner.sender))
        .filter((s) => s.to === alice.slice(1))
        .map((s) => s.messageId);
      expect(received).toEqual(accepted as string[]);
      // The injected failures hit Alice's sends in between, and were retried.
      const attempts = (await rows(aliceIds)).reduce((sum, r) => sum + r.send_attempts, 0);
      expect(attempts).toBe(51 + 3);
    } finally {
      await control("reset", {});
      await Promise.all(workers.map((w) => w.stop()));
    }
  }, 120_000);
});

// The claim's order check must stay an index lookup.
test("the pair index exists, and no index of messages names status (status updates stay in place)", async () => {
  const { rows: found } = await sql<{ indexname: string }>`
    SELECT indexname FROM pg_indexes WHERE indexname = 'messages_unsent_pair_idx'`.execute(env.deps.db);
  expect(found).toHaveLength(1);
  // A column in any index (or a partial index's WHERE) makes every update of it a non-HOT update.
  const { rows: naming } = await sql<{ indexname: string }>`
    SELECT indexname FROM pg_indexes
    WHERE tablename = 'messages' AND indexdef ~ '\mstatus\M'`.execute(env.deps.db);
  expect(naming.map((r) => r.indexname)).toEqual([]);
});
