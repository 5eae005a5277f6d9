import { Cluster } from "ioredis";
import { clusterReady, createRedis, type RedisTarget } from "../redis/connect.ts";
import { QUEUE_NAMES, queuePrefix } from "./index.ts";

/**
 * Deletes every key of one instance (tests, benchmarks): ours are `prefix:...`, BullMQ's
 * `{prefix:<queue>}:...` (each queue's hash-tagged prefix, src/queues). A Cluster's keys are spread
 * over its masters, each scanned; a key is deleted on its own (one DEL of keys in several slots is
 * refused by a Cluster).
 */
export async function deleteInstanceKeys(target: RedisTarget | string, prefix: string): Promise<void> {
  const redis = createRedis(target);
  const patterns = [`${prefix}:*`, ...QUEUE_NAMES.map((name) => `${queuePrefix(prefix, name)}:*`)];
  try {
    if (redis instanceof Cluster) await clusterReady(redis);
    const nodes = redis instanceof Cluster ? redis.nodes("master") : [redis];
    for (const node of nodes) {
      for (const pattern of patterns) {
        let cursor = "0";
        do {
          const [next, keys] = await node.scan(cursor, "MATCH", pattern, "COUNT", 1000);
          cursor = next;
          if (keys.length > 0) {
            const pipeline = node.pipeline();
            for (const key of keys) pipeline.unlink(key);
            await pipeline.exec();
          }
        } while (cursor !== "0");
      }
    }
  } finally {
    redis.disconnect();
  }
}
