/**
 * Issue 42 item 8: reading the event log up to its head. The SDK's `stopAtHead` ends a consumer at
 * the head, however slow the answers; an unreachable API is reported after one round of retries (the
 * token request's retries are not repeated by the call waiting for it); and the webhook-receiver
 * example says "caught up" only once it has read up to the head, and exits 1 naming the base URL when
 * the API is unreachable or refuses its credentials.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createShop, customerWrites, freshPhone, type Shop } from "../../test/support/fixtures.ts";
import {
  call,
  createTestEnv,
  eventually,
  freePort,
  spawnWorker,
  type TestEnv,
  type WorkerProcess,
} from "../../test/support/index.ts";
import { type MessageEvent, MessagingClient } from "../src/index.ts";
import { stubEventsClient } from "./stub-events.ts";

describe("the SDK (stub fetch, no service)", () => {
  test("stopAtHead reads every page up to the one without more, reports its cursor, and ends", async () => {
    const pages = [
      { data: ["evt_1", "evt_2"], has_more: true, next_cursor: "evc_a" },
      { data: ["evt_3"], has_more: false, next_cursor: "evc_b" },
    ];
    const asked: (string | null)[] = [];
    const client = stubEventsClient(async (since) => {
      asked.push(since);
      // Slower than the 2 s the example's old idle timer allowed for the whole catch-up.
      await Bun.sleep(1_100);
      return pages[asked.length - 1] ?? { data: [], has_more: false, next_cursor: "evc_b" };
    });
    const cursors: string[] = [];
    const read: string[] = [];
    for await (const event of client.events.consume({
      since: "evc_start",
      stopAtHead: true,
      onCursor: (cursor) => {
        cursors.push(cursor);
      },
    })) {
      read.push(event.id);
    }
    expect(read).toEqual(["evt_1", "evt_2", "evt_3"]);
    expect(cursors).toEqual(["evc_a", "evc_b"]);
    expect(asked).toEqual(["evc_start", "evc_a"]);
  });

  test("an unreachable API: the token request is tried maxAttempts times in all, then its error is thrown", async () => {
    let attempts = 0;
    const client = new MessagingClient({
      baseUrl: "https://api.example.test/v2",
      clientId: "cid_test",
      clientSecret: "csec_test",
      retry: { baseDelayMs: 1, maxDelayMs: 2, maxAttempts: 4 },
      fetch: async () => {
        attempts++;
        throw new TypeError("Unable to connect");
      },
    });
    const consume = async () => {
      for await (const _ of client.events.consume({ stopAtHead: true })) throw new Error("nothing to read");
    };
    await expect(consume()).rejects.toThrow("Unable to connect");
    // Not 4 token attempts for each of the call's 4 attempts.
    expect(attempts).toBe(4);
  });
});

describe("the webhook-receiver example", () => {
  let env: TestEnv;
  let workers: WorkerProcess[] = [];
  const example = join(import.meta.dir, "../examples/webhook-receiver.ts");

  beforeAll(async () => {
    env = await createTestEnv({ simulator: true });
    // Finalizes inbound messages; every worker process numbers the event log.
    workers = [spawnWorker(env, "finalize")];
  });
  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.stop()));
    await env.close();
  });

  /** The example run with `environment`: its output as it comes, and how it ended. */
  function runReceiver(environment: Record<string, string>) {
    const proc = Bun.spawn(["bun", example], {
      stdout: "pipe",
      stderr: "pipe",
      env: {
        ...process.env,
        PORT: "0",
        WEBHOOK_SECRET: "whsec_dGVzdHNlY3JldHRlc3RzZWNyZXQ=",
        ...environment,
      },
    });
    const output = { printed: "", logged: "" };
    const decoder = new TextDecoder();
    void (async () => {
      for await (const chunk of proc.stdout) output.printed += decoder.decode(chunk);
    })();
    void (async () => {
      for await (const chunk of proc.stderr) output.logged += decoder.decode(chunk);
    })();
    return { proc, output };
  }

  /** Runs the example until it exits by itself (killed after 30 s): its exit code and what it logged. */
  async function receiverExit(
    environment: Record<string, string>,
  ): Promise<{ code: number; logged: string }> {
    const { proc, output } = runReceiver(environment);
    const timeout = setTimeout(() => proc.kill("SIGKILL"), 30_000);
    const code = await proc.exited;
    clearTimeout(timeout);
    await Bun.sleep(50);
    return { code, logged: output.logged };
  }

  async function withCursorDir<T>(work: (cursorFile: string) => Promise<T>): Promise<T> {
    const dir = await mkdtemp(join(tmpdir(), "sdk-catch-up-"));
    try {
      return await work(join(dir, "events-cursor.txt"));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  test("an unreachable API: exit 1, the base URL named, never 'caught up'", async () => {
    const baseUrl = `http://127.0.0.1:${await freePort()}/v2`;
    await withCursorDir(async (cursorFile) => {
      const { code, logged } = await receiverExit({
        MESSAGING_BASE_URL: baseUrl,
        MESSAGING_CLIENT_ID: "cid_x",
        MESSAGING_CLIENT_SECRET: "csec_x",
        EVENTS_CURSOR_FILE: cursorFile,
      });
      expect(code).toBe(1);
      expect(logged).toContain(`the catch-up failed: could not reach ${baseUrl}`);
      expect(logged).not.toContain("caught up");
    });
  });

  test("credentials refused: exit 1, the base URL and the variables to check named", async () => {
    const tenant = await createShop(env, "Catch-up refused");
    const baseUrl = `${env.apiUrl}/v2`;
    await withCursorDir(async (cursorFile) => {
      const { code, logged } = await receiverExit({
        MESSAGING_BASE_URL: baseUrl,
        MESSAGING_CLIENT_ID: tenant.clientId,
        MESSAGING_CLIENT_SECRET: "csec_wrong",
        EVENTS_CURSOR_FILE: cursorFile,
      });
      expect(code).toBe(1);
      expect(logged).toContain(`the catch-up failed: ${baseUrl} refused the credentials (invalid_client`);
      expect(logged).toContain("check MESSAGING_CLIENT_ID and MESSAGING_CLIENT_SECRET");
      expect(logged).not.toContain("caught up");
    });
  });

  test("a working but slow API: every event up to the head is read before 'caught up'", async () => {
    const tenant: Shop = await createShop(env, "Catch-up slow");
    const phone = freshPhone();
    const texts = ["one", "two", "three"];
    for (const text of texts)
      await customerWrites(env, tenant.phoneNumberId, { from: phone, type: "text", text });
    const events = await eventually(async () => {
      const page = await call(env.app, "GET", "/v2/events", { token: tenant.token });
      const data = page.body.data as MessageEvent[];
      return data.length === texts.length ? data : undefined;
    }, 30_000);

    // Every answer of the API comes 2.5 s late: longer than the whole catch-up the old idle timer allowed.
    const slow = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        await Bun.sleep(2_500);
        const url = new URL(request.url);
        const body = request.method === "GET" ? undefined : await request.arrayBuffer();
        return fetch(`${env.apiUrl}${url.pathname}${url.search}`, {
          method: request.method,
          headers: request.headers,
          body,
          redirect: "manual",
        });
      },
    });
    try {
      await withCursorDir(async (cursorFile) => {
        const { proc, output } = runReceiver({
          MESSAGING_BASE_URL: `http://127.0.0.1:${slow.port}/v2`,
          MESSAGING_CLIENT_ID: tenant.clientId,
          MESSAGING_CLIENT_SECRET: tenant.clientSecret,
          EVENTS_CURSOR_FILE: cursorFile,
        });
        try {
          await eventually(async () => output.logged.includes("caught up"), 30_000);
          expect(output.logged).toContain("caught up (3 events read); waiting for deliveries");
          const lines = await eventually(async () => {
            const printed = output.printed.trim().split("\n");
            return printed.length === texts.length ? printed : undefined;
          });
          expect(lines).toEqual(
            events.map((e, i) => `${e.id} message.received ${e.data.id} ${phone} ${texts[i]} (catch-up)`),
          );
          expect(await readFile(cursorFile, "utf8")).toStartWith("evc_");
          // It goes on to take pushes until stopped.
          expect(proc.exitCode).toBeNull();
          proc.kill("SIGINT");
          expect(await proc.exited).toBe(0);
        } finally {
          proc.kill("SIGKILL");
        }
      });
    } finally {
      await slow.stop(true);
    }
  }, 60_000);
});
