/**
 * Issue 21: clients built by createRedis follow a Redis Cluster failover. At ea91cc0 a client was
 * still failing 60 s after the promotion: its connection to the dead master kept reconnecting
 * (clusterNodeRetryStrategy) and ioredis 6 never refreshed its slot map. The cluster here is this
 * test's own (3 masters + 3 replicas on free ports), whatever REDIS_CLUSTER_NODES says.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type LocalCluster, startRedisCluster } from "../../scripts/redis-cluster.ts";
import { loadConfig } from "../../src/config.ts";
import { createRedis, type RedisClient } from "../../src/redis/connect.ts";

let cluster: LocalCluster;
const clients: RedisClient[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster({ replicas: 1, nodeTimeoutMs: 2000 });
}, 60_000);
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await cluster.stop();
});

function client(options: Parameters<typeof createRedis>[1] = {}): RedisClient {
  const target = loadConfig({ NODE_ENV: "development", REDIS_CLUSTER_NODES: cluster.nodes });
  const made = createRedis(target, options);
  clients.push(made);
  return made;
}

/** Ms from `since` until `command` answers (each try bounded, a hang counts as a failure). */
async function answersAfter(
  since: number,
  command: () => Promise<unknown>,
  limitMs: number,
): Promise<number> {
  while (Date.now() - since < limitMs) {
    const ok = await Promise.race([command().then(() => true), Bun.sleep(3000).then(() => false)]).catch(
      () => false,
    );
    if (ok) return Date.now() - since;
    await Bun.sleep(100);
  }
  return Number.POSITIVE_INFINITY;
}

test("busy, idle and queue clients use the promoted replica within seconds", async () => {
  const key = "{t:failover-test}:counter";
  const api = client();
  const queue = client({ forQueues: true });
  const idle = client();
  for (const c of [api, queue, idle]) await c.incr(key);

  const master = await cluster.masterOf(key);
  cluster.kill(master);
  // The api client keeps trying meanwhile (busy); its tries fail fast (a bounded wait), never hang.
  const busy = (async () => {
    for (;;) {
      const started = Date.now();
      const ok = await api.incr(key).then(
        () => true,
        () => false,
      );
      expect(Date.now() - started).toBeLessThan(5000);
      if (ok && (await cluster.masterOf(key).catch(() => master)) !== master) return;
      await Bun.sleep(100);
    }
  })();
  let promotedAt = 0;
  while (promotedAt === 0) {
    if ((await cluster.masterOf(key).catch(() => master)) !== master) promotedAt = Date.now();
    else await Bun.sleep(100);
  }
  const after = {
    api: await answersAfter(promotedAt, () => api.incr(key), 10_000),
    queue: await answersAfter(promotedAt, () => queue.incr(key), 10_000),
    idle: await answersAfter(promotedAt, () => idle.incr(key), 10_000),
  };
  await busy;
  expect(after.api).toBeLessThan(3000);
  expect(after.queue).toBeLessThan(3000);
  expect(after.idle).toBeLessThan(3000);

  // The dead node comes back as the new master's replica; nothing changes for the clients.
  cluster.restart(master);
  while (!(await cluster.isSyncedReplica(master))) await Bun.sleep(200);
  expect(Number(await api.incr(key))).toBeGreaterThan(3);
}, 90_000);
