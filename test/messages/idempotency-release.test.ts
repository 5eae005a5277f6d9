import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { localRedisArgs } from "../../scripts/services.ts";
import { inFlightMarker, releaseIdempotencyMarker } from "../../src/messages/idempotency.ts";
import { createRedis } from "../../src/redis/connect.ts";
import { eventually, freePort } from "../support/index.ts";

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
