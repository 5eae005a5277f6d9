import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { localRedisArgs } from "../../scripts/services.ts";
import { doneMarker, inFlightMarker, releaseIdempotencyMarker } from "../../src/messages/idempotency.ts";
import { createRedis } from "../../src/redis/connect.ts";
import { createTestEnv, eventually, freePort } from "../support/index.ts";

/**
 * A request that fails while Redis is away (a Cluster failover) may have claimed its
 * Idempotency-Key before its answer was lost, and the promoted replica then holds the claim. Its
 * release is tried again until Redis answers, so the client's retry of that key is not answered 409
 * for the rest of the claim's 30 s.
 */
test("a release that cannot reach Redis is tried again once it answers, and frees only its own claim", async () => {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const redis = createRedis(url);
  const mine = "release-test:{ten_1}:idem:k1";
  const theirs = "release-test:{ten_1}:idem:k2";

  // Nothing listens yet: both releases fail now.
  await releaseIdempotencyMarker(redis, mine, "req_mine");
  await releaseIdempotencyMarker(redis, theirs, "req_mine");

  // Redis comes back holding the claims (as a promoted replica that had them replicated).
  const dir = mkdtempSync(join(tmpdir(), "release-test-"));
  const server = Bun.spawn(["redis-server", ...localRedisArgs(port, dir)], {
    stdout: "ignore",
    stderr: "ignore",
  });
  const direct = createRedis(url);
  try {
    await eventually(async () => (await direct.ping().catch(() => "")) === "PONG");
    await direct.set(mine, inFlightMarker("req_mine"), "PX", 30_000);
    await direct.set(theirs, inFlightMarker("req_theirs"), "PX", 30_000);

    await eventually(async () => (await direct.get(mine)) === null, 10_000);
    // Another request's claim outlives retries of a release that is not its owner's.
    await Bun.sleep(1500);
    expect(await direct.get(theirs)).toBe(inFlightMarker("req_theirs"));
  } finally {
    redis.disconnect();
    direct.disconnect();
    server.kill();
    await server.exited;
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a release deletes only an in-flight claim of its own: never a done marker, another owner's claim or a value it cannot read", async () => {
  const env = await createTestEnv();
  const redis = env.deps.redis;
  const key = (name: string) => `${env.config.redisPrefix}:{ten_release}:idem:${name}`;
  try {
    const values = {
      mine: inFlightMarker("req_mine"),
      theirs: inFlightMarker("req_theirs"),
      done: doneMarker("ab12", "msg_1"),
      unreadable: "not json",
    };
    for (const [name, value] of Object.entries(values)) await redis.set(key(name), value, "PX", 30_000);
    for (const name of Object.keys(values)) await releaseIdempotencyMarker(redis, key(name), "req_mine");
    expect(await redis.get(key("mine"))).toBeNull();
    expect(await redis.get(key("theirs"))).toBe(values.theirs);
    expect(await redis.get(key("done"))).toBe(values.done);
    expect(await redis.get(key("unreadable"))).toBe(values.unreadable);
    // A done marker that happens to carry the token field is still not a claim.
    await redis.set(key("done-with-t"), JSON.stringify({ s: "d", t: "req_mine", m: "msg_2" }), "PX", 30_000);
    await releaseIdempotencyMarker(redis, key("done-with-t"), "req_mine");
    expect(await redis.get(key("done-with-t"))).not.toBeNull();
  } finally {
    await env.close();
  }
});
