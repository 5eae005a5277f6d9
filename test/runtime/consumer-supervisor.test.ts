/**
 * A worker process replaces a queue consumer that stopped taking jobs while jobs wait
 * (workers/consumer-supervisor.ts). The stuck consumer here is a real BullMQ worker on the test's
 * Redis whose connection was closed for good: BullMQ retries its fetch on that connection forever.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Processor, Worker } from "bullmq";
import { createLogger } from "../../src/logger.ts";
import { queuePrefix } from "../../src/queues/index.ts";
import { createRedis, type RedisClient } from "../../src/redis/connect.ts";
import { type ConsumerParts, readyJobs, superviseConsumer } from "../../workers/consumer-supervisor.ts";
import { createTestEnv, eventually, type TestEnv } from "../support/index.ts";

let env: TestEnv;
const connections: RedisClient[] = [];
const workers: Worker[] = [];

beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.close(true).catch(() => {})));
  for (const connection of connections) connection.disconnect();
  await env.close();
});

/** A consumer of the test's `status` queue, watched every 50 ms: stuck once jobs waited 400 ms. */
function supervised(options: {
  processor: Processor;
  concurrency?: number;
  heldBack?: () => boolean;
  /** Called when a worker is made for a replacement (before it takes anything). */
  onReplacement?: () => void;
}) {
  const made: ConsumerParts<unknown>[] = [];
  const queue = env.deps.queues.status;
  const consumer = superviseConsumer<unknown>({
    queue: "status",
    concurrency: options.concurrency ?? 2,
    processor: options.processor,
    create(processor) {
      if (made.length > 0) options.onReplacement?.();
      const connection = createRedis(env.config, { forQueues: true });
      const worker = new Worker("status", processor, {
        connection,
        prefix: queuePrefix(env.config.redisPrefix, "status"),
        concurrency: options.concurrency ?? 2,
      });
      worker.on("error", () => {});
      connections.push(connection);
      workers.push(worker);
      made.push({ worker, connection });
      return { worker, connection };
    },
    waiting: () => readyJobs(queue),
    heldBack: options.heldBack ?? (() => false),
    logger: createLogger("silent", "test"),
    checkMs: 50,
    stuckMs: 400,
  });
  return { consumer, made };
}

async function addJobs(names: string[]): Promise<void> {
  for (const name of names) await env.deps.queues.status.add(name, { nudgedAt: Date.now() });
}

test("a consumer whose connection is gone for good is replaced, and the waiting jobs are taken", async () => {
  const done: string[] = [];
  let doneAtReplacement = -1;
  const { consumer, made } = supervised({
    processor: async (job) => {
      done.push(job.name);
    },
    onReplacement: () => {
      doneAtReplacement = done.length;
    },
  });
  try {
    await addJobs(["before"]);
    await eventually(async () => done.includes("before"));
    // The worker's own connection closes for good (no reconnect): its fetches fail from now on.
    made[0]?.connection.disconnect();
    await Bun.sleep(100);
    await addJobs(["after-1", "after-2"]);
    await eventually(async () => done.includes("after-1") && done.includes("after-2"), 10_000);
    // Nothing was taken until the replacement: the closed worker was stuck, not slow.
    expect(doneAtReplacement).toBe(1);
    expect(consumer.replacements()).toBe(1);
    expect(made).toHaveLength(2);
    expect(consumer.current()).toBe(made[1]?.worker as Worker);
  } finally {
    consumer.stop();
    await consumer.current().close();
  }
});

test("an idle consumer, a busy one and one held back are left alone", async () => {
  // Idle: nothing waits.
  const idle = supervised({ processor: async () => {} });
  // Busy: its one slot holds a job until released, while another waits.
  let release: () => void = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const busyDone: string[] = [];
  const busy = supervised({
    concurrency: 1,
    processor: async (job) => {
      if (job.name === "long") await released;
      busyDone.push(job.name);
    },
  });
  try {
    await Bun.sleep(600);
    expect(idle.consumer.replacements()).toBe(0);
    idle.consumer.stop();
    await idle.made[0]?.worker.close();

    await addJobs(["long", "next"]);
    await Bun.sleep(800);
    expect(busy.consumer.replacements()).toBe(0);
    release();
    await eventually(async () => busyDone.includes("next"));
    expect(busy.consumer.replacements()).toBe(0);
  } finally {
    idle.consumer.stop();
    busy.consumer.stop();
    release();
    await busy.made[0]?.worker.close();
  }

  // Held back (the process paused its consumers for a dependency): a stuck one waits its turn.
  let holding = true;
  const held = supervised({ processor: async () => {}, heldBack: () => holding });
  try {
    held.made[0]?.connection.disconnect();
    await addJobs(["held"]);
    await Bun.sleep(800);
    expect(held.consumer.replacements()).toBe(0);
    holding = false;
    await eventually(async () => held.consumer.replacements() === 1, 5000);
  } finally {
    held.consumer.stop();
  }
});
