import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { createShop, simulatorSends } from "../support/fixtures.ts";
import {
  createTestEnv,
  eventually,
  freePort,
  spawnWorker,
  type TestEnv,
  type WorkerProcess,
} from "../support/index.ts";

/**
 * SIGTERM to the api and the send worker in the middle of a burst of sends (issue 7): every
 * message the api accepted (201) is later `sent`, and reaches the provider exactly once; no job
 * is left `active`; both processes exit 0.
 */
const PHONE_NUMBER_ID = "309000000000001";
const BURST = 150;
const CONCURRENCY = 12;

let env: TestEnv;
let token: string;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  ({ token } = await createShop(env, "Acme", {
    sendLimit: 100_000,
    phoneNumberId: PHONE_NUMBER_ID,
    templates: true,
  }));
});
afterAll(() => env.close());

function spawnApi(port: number): Subprocess {
  return Bun.spawn(["bun", "src/server.ts"], {
    env: {
      ...process.env,
      NODE_ENV: "development",
      PORT: String(port),
      DATABASE_URL: env.config.databaseUrl,
      REDIS_URL: env.config.redisUrl,
      REDIS_PREFIX: env.config.redisPrefix,
      WHATSAPP_GRAPH_URL: env.config.whatsappGraphUrl,
      LOG_LEVEL: "silent",
    },
    stdout: "inherit",
    stderr: "inherit",
  });
}

describe("graceful shutdown under load", () => {
  test("SIGTERM to api and send worker mid-burst: every accepted message is sent exactly once", async () => {
    const port = await freePort();
    const api = spawnApi(port);
    const base = `http://127.0.0.1:${port}`;
    const worker: WorkerProcess = spawnWorker(env, "send");
    let replacement: WorkerProcess | undefined;
    try {
      await eventually(async () => (await fetch(`${base}/healthz`).catch(() => undefined))?.ok, 20_000);

      const accepted: string[] = [];
      const outcomes = new Map<string, number>();
      let answered = 0;
      let signalled = false;
      let next = 0;
      const sendOne = async (index: number) => {
        const response = await fetch(`${base}/v2/messages`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify({
            to: `+4915109${String(index).padStart(5, "0")}`,
            template: { name: "order_shipped", language: "en", variables: { body: ["Ada", `#${index}`] } },
          }),
        }).catch(() => undefined); // refused once the api has stopped listening: not accepted
        const status = response?.status ?? 0;
        outcomes.set(String(status), (outcomes.get(String(status)) ?? 0) + 1);
        if (response?.status === 201) accepted.push(((await response.json()) as { id: string }).id);
        else await response?.body?.cancel();
        answered++;
        if (answered === 40 && !signalled) {
          signalled = true;
          api.kill("SIGTERM");
          worker.proc.kill("SIGTERM");
        }
      };
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < BURST) await sendOne(next++);
        }),
      );

      // Both drain and exit cleanly; requests in flight at the signal were answered, not cut.
      expect(await api.exited).toBe(0);
      expect(await worker.proc.exited).toBe(0);
      expect(accepted.length).toBeGreaterThanOrEqual(40);
      // Every request either got an answer or found the door closed; none was a 5xx.
      expect([...outcomes.keys()].filter((status) => status !== "201" && status !== "0")).toEqual([]);

      // A new worker finishes what is left.
      replacement = spawnWorker(env, "send");
      await eventually(async () => {
        const rows = await env.deps.db
          .selectFrom("messages")
          .select(["id", "status"])
          .where("id", "in", accepted)
          .execute();
        return rows.length === accepted.length && rows.every((row) => row.status !== "accepted");
      }, 45_000);
      const rows = await env.deps.db
        .selectFrom("messages")
        .select(["id", "status"])
        .where("id", "in", accepted)
        .execute();
      expect(rows.filter((row) => !["sent", "delivered", "read"].includes(row.status ?? ""))).toEqual([]);

      const sent = await simulatorSends(env, PHONE_NUMBER_ID);
      const perMessage = new Map<string, number>();
      for (const record of sent) {
        const id = record.payload.biz_opaque_callback_data ?? "";
        perMessage.set(id, (perMessage.get(id) ?? 0) + 1);
      }
      expect(accepted.filter((id) => perMessage.get(id) !== 1)).toEqual([]);
      expect(sent).toHaveLength(accepted.length);
      // No job is left active (the replacement may still be completing its last nudges).
      await eventually(async () => (await env.deps.queues.send.getJobCounts("active")).active === 0, 10_000);
    } finally {
      api.kill("SIGKILL");
      worker.proc.kill("SIGKILL");
      await replacement?.stop();
    }
  }, 120_000);
});
