import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { CHANNEL } from "../../src/channel/provider.ts";
import { utcDay } from "../../src/clock.ts";
import type { ApiError } from "../../src/http/errors.ts";
import type { AuthContext } from "../../src/http/request-state.ts";
import { createSendAdmission } from "../../src/messages/admission.ts";
import { idempotencyRedisKey, releaseIdempotencyReservation } from "../../src/messages/idempotency.ts";
import type { RedisClient } from "../../src/redis/connect.ts";
import { createShop, freshPhone, ORDER_SHIPPED, postMessage } from "../support/fixtures.ts";
import {
  call,
  createTenantWithApp,
  createTestEnv,
  deleteRedisPrefix,
  getToken,
  nextSecond,
  type TestEnv,
} from "../support/index.ts";

/**
 * scripts/send_admission.lua: the rate limit, the daily quota and the Idempotency-Key claim in one
 * Redis call, and the key's done marker written with its accept batch.
 */

let env: TestEnv;
let tenantId: string;
let clientId: string;
let token: string;
let readToken: string;
const SEND_LIMIT = 50;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { anonymous: 10_000, token: 10_000 } });
  const shop = await createShop(env, "Acme", { sendLimit: SEND_LIMIT, templates: true });
  ({ tenantId, clientId, token } = shop);
  readToken = await getToken(env.app, shop.clientId, shop.clientSecret, "messaging:read");
});
afterAll(() => env.close());

const send = (body: unknown, key?: string, options: { token?: string; app?: TestEnv["app"] } = {}) =>
  postMessage(options.app ?? env.app, options.token ?? token, body, { key });

function auth(): AuthContext {
  return { clientId, tenantId, scopes: ["messaging:send"], readLimit: 1000, sendLimit: SEND_LIMIT };
}

async function quotaUsed(): Promise<number> {
  const key = env.deps.keys.dailyQuota(tenantId, CHANNEL, utcDay(env.clock.now()).key);
  return Number((await env.deps.redis.get(key)) ?? 0);
}

async function marker(key: string): Promise<{ s: string; m?: string; t?: string } | null> {
  const raw = await env.deps.redis.get(idempotencyRedisKey(env.deps.keys, auth(), key));
  return raw ? JSON.parse(raw) : null;
}

async function messagesTo(phone: string): Promise<number> {
  const rows = await env.deps.db
    .selectFrom("messages")
    .innerJoin("contacts", "contacts.id", "messages.contact_id")
    .select("messages.id")
    .where("contacts.tenant_id", "=", tenantId)
    .where("contacts.phone", "=", phone)
    .execute();
  return rows.length;
}

describe("the Idempotency-Key claimed by the admission", () => {
  test("a twin while the key is in flight: 409 with Retry-After, and no quota unit is reserved for it", async () => {
    await nextSecond();
    // Another request holds the key: claimed by an admission of its own, not finished yet.
    const admitSend = createSendAdmission({ ...env.deps, defaultDailyQuota: 1_000_000 });
    const holder = await admitSend(auth(), { key: "twin-1", token: "req_holder" });
    expect(holder.idempotency?.taken).toBeUndefined();
    expect((await marker("twin-1"))?.t).toBe("req_holder");
    const before = await quotaUsed();

    const twin = await send({ to: freshPhone(), template: ORDER_SHIPPED }, "twin-1");
    expect(twin.status).toBe(409);
    expect(twin.body.error.code).toBe("idempotency_key_in_use");
    expect(twin.headers.get("retry-after")).toBe("1");
    expect(await quotaUsed()).toBe(before);
    // The twin's answer did not release the holder's claim.
    expect((await marker("twin-1"))?.t).toBe("req_holder");

    // The holder gives up (its request created nothing): the key is free for the next request.
    await releaseIdempotencyReservation(env.deps.redis, holder.idempotency!);
    expect(await marker("twin-1")).toBeNull();
    const phone = freshPhone();
    expect((await send({ to: phone, template: ORDER_SHIPPED }, "twin-1")).status).toBe(201);
    expect(await messagesTo(phone)).toBe(1);
  });

  test("a finished key replays its original message (200) from the done marker; the replay spends no quota", async () => {
    const body = { to: freshPhone(), template: ORDER_SHIPPED };
    const first = await send(body, "replay-1");
    expect(first.status).toBe(201);
    // Written with the accept batch, before the 201 left.
    expect(await marker("replay-1")).toMatchObject({ s: "d", m: first.body.id });
    const used = await quotaUsed();

    const again = await send(body, "replay-1");
    expect(again.status).toBe(200);
    expect(again.headers.get("idempotency-replayed")).toBe("true");
    expect(again.body.id).toBe(first.body.id);
    expect(await quotaUsed()).toBe(used);

    const other = await send(
      { ...body, template: { ...ORDER_SHIPPED, variables: { body: ["Bo", "B-2"] } } },
      "replay-1",
    );
    expect(other.status).toBe(400);
    expect(other.body.error.code).toBe("idempotency_key_reused");
    expect(await quotaUsed()).toBe(used);
    expect(await messagesTo(body.to)).toBe(1);
  });

  test("Redis flushed between two same-key requests: still one message, and the marker is done again", async () => {
    const body = { to: freshPhone(), template: ORDER_SHIPPED };
    const first = await send(body, "flush-1");
    expect(first.status).toBe(201);
    await deleteRedisPrefix(env.config.redisPrefix);
    const again = await send(body, "flush-1");
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
    expect(await marker("flush-1")).toMatchObject({ s: "d", m: first.body.id });
    expect(await messagesTo(body.to)).toBe(1);
    // The replay found in Postgres gave its reserved unit back (a rebuilt counter: 1 message today).
    const accepted = await env.deps.db
      .selectFrom("messages")
      .select((eb) => eb.fn.countAll<number>().as("n"))
      .where("tenant_id", "=", tenantId)
      .executeTakeFirstOrThrow();
    expect(await quotaUsed()).toBe(Number(accepted.n));
  });

  test("a refused send gives its quota unit and its key back", async () => {
    const used = await quotaUsed();
    const refused = await send({ to: freshPhone(), template: { name: "no_such_template" } }, "refused-1");
    expect(refused.status).toBe(400);
    expect(await quotaUsed()).toBe(used);
    expect(await marker("refused-1")).toBeNull();

    // Refused before the route ran (the token lacks the scope): given back by the pipeline.
    const forbidden = await send({ to: freshPhone(), template: ORDER_SHIPPED }, "refused-2", {
      token: readToken,
    });
    expect(forbidden.status).toBe(403);
    expect(await quotaUsed()).toBe(used);
    expect(await marker("refused-2")).toBeNull();

    // A body the schema refuses, likewise.
    const invalid = await send({ to: 5 }, "refused-3");
    expect(invalid.status).toBe(400);
    expect(await quotaUsed()).toBe(used);
    expect(await marker("refused-3")).toBeNull();

    const phone = freshPhone();
    expect((await send({ to: phone, template: ORDER_SHIPPED }, "refused-1")).status).toBe(201);
    expect(await quotaUsed()).toBe(used + 1);
  });

  test("a trailing slash is the same send: admitted, counted against the quota and the send limit", async () => {
    const used = await quotaUsed();
    const phone = freshPhone();
    const answer = await call(env.app, "POST", "/v2/messages/", {
      body: { to: phone, template: ORDER_SHIPPED },
      token,
    });
    expect(answer.status).toBe(201);
    expect(answer.headers.get("ratelimit-limit")).toBe(String(SEND_LIMIT));
    expect(await quotaUsed()).toBe(used + 1);
    expect(await messagesTo(phone)).toBe(1);
  });

  test("rate-limit headers are as before: every admitted request counts, the one over the limit is 429", async () => {
    const creds = await createTenantWithApp(env.deps, { sendLimit: 3 });
    const small = await getToken(env.app, creds.clientId, creds.clientSecret);
    await nextSecond();
    const answers = [
      await send({ to: freshPhone(), template: ORDER_SHIPPED }, "limit-1", { token: small }),
      await send({ to: freshPhone(), template: ORDER_SHIPPED }, "limit-1", { token: small }),
      await send({ to: freshPhone(), template: ORDER_SHIPPED }, undefined, { token: small }),
      await send({ to: freshPhone(), template: ORDER_SHIPPED }, "limit-2", { token: small }),
    ];
    // This tenant has no sender: every admitted send is refused after admission (409), and still counted.
    expect(answers.map((a) => a.headers.get("ratelimit-limit"))).toEqual(["3", "3", "3", "3"]);
    expect(answers.map((a) => a.headers.get("ratelimit-remaining"))).toEqual(["2", "1", "0", "0"]);
    expect(answers[3]!.status).toBe(429);
    expect(answers[3]!.body.error.code).toBe("rate_limit_exceeded");
    const reset = Number(answers[3]!.headers.get("ratelimit-reset"));
    expect(reset).toBeGreaterThanOrEqual(0);
    expect(reset).toBeLessThanOrEqual(1);
    expect(Number(answers[3]!.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  });
});

describe("round trips", () => {
  /** The app over a Redis whose calls (and the commands of each pipeline) are written down. */
  const recordingApp = () => {
    const calls: string[] = [];
    const piped: string[][] = [];
    const record = <T extends object>(target: T, into: string[]): T =>
      new Proxy(target, {
        get(object, property, receiver) {
          const value = Reflect.get(object, property, receiver);
          if (typeof value !== "function" || typeof property !== "string") return value;
          return (...args: unknown[]) => {
            into.push(property);
            const result = (value as (...a: unknown[]) => unknown).apply(object, args);
            if (property !== "pipeline") return result;
            const commands: string[] = [];
            piped.push(commands);
            return record(result as object, commands);
          };
        },
      });
    const redis = record(env.deps.redis, calls) as RedisClient;
    return { app: createApp({ ...env.deps, redis }), calls, piped };
  };

  test("a keyed send: one admission call and the done marker, no other command of ours", async () => {
    const { app, calls, piped } = recordingApp();
    const sent = await send({ to: freshPhone(), template: ORDER_SHIPPED }, "trips-1", { app });
    expect(sent.status).toBe(201);
    // Each alone in its turn of the event loop, so sent as plain commands (src/redis/connect.ts).
    expect(calls).toEqual(["sendAdmission", "set"]);
    expect(piped).toEqual([]);
  });

  /** A Redis whose script calls (with their key counts) and pipelines are written down. */
  const recordingRedis = () => {
    const calls: { name: string; keys?: number }[] = [];
    const piped: string[][] = [];
    const redis = new Proxy(env.deps.redis, {
      get(target, property, receiver) {
        if (property === "sendAdmission")
          return (numberOfKeys: number, ...rest: (string | number)[]) => {
            calls.push({ name: "sendAdmission", keys: numberOfKeys });
            return target.sendAdmission(numberOfKeys, ...rest);
          };
        if (property !== "pipeline") return Reflect.get(target, property, receiver);
        return () => {
          const pipeline = target.pipeline();
          const commands: string[] = [];
          piped.push(commands);
          return new Proxy(pipeline, {
            get(inner, name, innerReceiver) {
              const value = Reflect.get(inner, name, innerReceiver);
              if (typeof value !== "function" || typeof name !== "string") return value;
              commands.push(name);
              return value.bind(inner);
            },
          });
        };
      },
    });
    return { redis, calls, piped };
  };

  test("admissions of one turn of the event loop, one tenant: one script call for them all (src/redis/coalesce.ts)", async () => {
    const { redis, calls, piped } = recordingRedis();
    const admitSend = createSendAdmission({ ...env.deps, redis, defaultDailyQuota: 1_000_000 });
    await (await admitSend({ ...auth(), sendLimit: 100 })).refund(); // the tenant's quota is cached now
    calls.length = 0;
    const admitted = await Promise.all([1, 2, 3].map(() => admitSend({ ...auth(), sendLimit: 100 })));
    // The quota counter, the directory version, and a window counter and a claim key for each send.
    expect(calls).toEqual([{ name: "sendAdmission", keys: 2 + 2 * 3 }]);
    expect(piped).toEqual([]);
    expect(admitted.every((a) => a.rate.allowed)).toBe(true);
    await Promise.all(admitted.map((admission) => admission.refund()));
  });

  test("admissions of two tenants in one turn: a script call each, in one pipeline", async () => {
    const other = await createTenantWithApp(env.deps, { sendLimit: 100 });
    const otherAuth: AuthContext = { ...auth(), tenantId: other.tenant.id, clientId: other.clientId };
    const { redis, calls, piped } = recordingRedis();
    const admitSend = createSendAdmission({ ...env.deps, redis, defaultDailyQuota: 1_000_000 });
    await Promise.all([auth(), otherAuth].map(async (a) => (await admitSend(a)).refund()));
    calls.length = 0;
    piped.length = 0;
    const admitted = await Promise.all([auth(), otherAuth, auth()].map((a) => admitSend(a)));
    // A Cluster takes a pipeline per slot (src/redis/connect.ts): the two tenants' slots differ.
    expect(piped).toEqual(
      env.deps.redis.isCluster
        ? [
            ["sendAdmission", "exec"],
            ["sendAdmission", "exec"],
          ]
        : [["sendAdmission", "sendAdmission", "exec"]],
    );
    // The two sends of one application were counted in turn (in one second: the same window).
    if (admitted[0]!.rate.resetEpoch === admitted[2]!.rate.resetEpoch)
      expect(admitted[2]!.rate.remaining).toBe(admitted[0]!.rate.remaining - 1);
    await Promise.all(admitted.map((admission) => admission.refund()));
  });

  /**
   * A new tenant's application and an admission whose cache holds the tenant's quota already, so
   * that admissions started together go in one turn, in order: one script call.
   */
  const tenantReady = async (limits: { sendLimit: number; dailyQuota: number }) => {
    const creds = await createTenantWithApp(env.deps, limits);
    const tenantAuth: AuthContext = {
      ...auth(),
      tenantId: creds.tenant.id,
      clientId: creds.clientId,
      sendLimit: limits.sendLimit,
    };
    const admitSend = createSendAdmission({ ...env.deps, defaultDailyQuota: 1_000_000 });
    await (await admitSend(tenantAuth)).refund();
    return { auth: tenantAuth, admitSend };
  };

  test("within one call each send is decided in turn: the send limit, the quota and a key claimed twice", async () => {
    const { auth: small, admitSend } = await tenantReady({ sendLimit: 3, dailyQuota: 1_000_000 });
    await nextSecond();
    const outcomes = await Promise.allSettled([
      admitSend(small, { key: "same-1", token: "req_a" }),
      admitSend(small, { key: "same-1", token: "req_b" }),
      admitSend(small),
      admitSend(small),
    ]);
    const [first, twin, third, over] = outcomes;
    expect(first.status === "fulfilled" && first.value.idempotency?.taken).toBeUndefined();
    // The twin found the first's in-flight claim (answered 409 by the route); no unit reserved for it.
    expect(twin.status === "fulfilled" && JSON.parse(twin.value.idempotency?.taken ?? "{}").t).toBe("req_a");
    expect(third.status === "fulfilled" && third.value.rate.remaining).toBe(0);
    expect(over.status).toBe("rejected");
    expect(over.status === "rejected" && (over.reason as ApiError).code).toBe("rate_limit_exceeded");
    const quotaKey = env.deps.keys.dailyQuota(small.tenantId, CHANNEL, utcDay(env.clock.now()).key);
    // The first and the third reserved a unit each.
    expect(Number(await env.deps.redis.get(quotaKey))).toBe(2);
    for (const o of outcomes) if (o.status === "fulfilled") await o.value.refund();
    expect(Number(await env.deps.redis.get(quotaKey))).toBe(0);
  });

  test("within one call the quota runs out at its last unit", async () => {
    const { auth: capped, admitSend } = await tenantReady({ sendLimit: 100, dailyQuota: 2 });
    const outcomes = await Promise.allSettled([1, 2, 3].map(() => admitSend(capped)));
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "rejected"]);
    const refused = outcomes[2]!;
    expect(refused.status === "rejected" && (refused.reason as ApiError).code).toBe("quota_exceeded");
  });
});

describe("a refund gives back only what a counter still holds", () => {
  test("Redis lost the day's counter: the refund writes nothing, and the next admission rebuilds it", async () => {
    await nextSecond();
    const admitSend = createSendAdmission({ ...env.deps, defaultDailyQuota: 1_000_000 });
    const key = env.deps.keys.dailyQuota(tenantId, CHANNEL, utcDay(env.clock.now()).key);
    const admitted = await admitSend(auth());
    await env.deps.redis.del(key);
    await admitted.refund();
    // At ea91cc0 a DECR of the missing key wrote -1 with no TTL, which the next admission trusted.
    expect(await env.deps.redis.exists(key)).toBe(0);
    const next = await admitSend(auth());
    expect(Number(await env.deps.redis.get(key))).toBeGreaterThan(0);
    expect(await env.deps.redis.ttl(key)).toBeGreaterThan(0);
    await next.refund();
  });

  test("a counter at zero stays at zero", async () => {
    const key = env.deps.keys.dailyQuota(tenantId, CHANNEL, "19990101");
    await env.deps.redis.set(key, "0", "EX", 60);
    expect(await env.deps.redis.refundQuota(key)).toBe(0);
    expect(await env.deps.redis.get(key)).toBe("0");
    await env.deps.redis.set(key, "3", "EX", 60);
    expect(await env.deps.redis.refundQuota(key)).toBe(2);
    await env.deps.redis.del(key);
    expect(await env.deps.redis.refundQuota(key)).toBe(-1);
    expect(await env.deps.redis.exists(key)).toBe(0);
  });
});
