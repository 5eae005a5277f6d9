import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { createApp } from "../../src/app.ts";
import type { ChannelProvider, SenderCredentials } from "../../src/channel/provider.ts";
import { buildWebhook, type DeliveryStatus, webhookTimestamp } from "../../src/channel/webhook-payloads.ts";
import { runCli } from "../../src/cli/index.ts";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { deriveKey } from "../../src/crypto/keys.ts";
import { open, seal } from "../../src/crypto/secret-box.ts";
import { createFeedCursorCodec } from "../../src/feed/cursor.ts";
import { createTokenService, TOKEN_LIFETIME_SECONDS } from "../../src/oauth/tokens.ts";
import { SendNotYetPossible } from "../../src/outbound/send.ts";
import { applyStatusEvents } from "../../src/outbound/status.ts";
import type { SenderRow } from "../../src/senders/repository.ts";
import {
  createShop,
  freshPhone,
  messageRow,
  ORDER_SHIPPED,
  postMessage,
  statusEventsOf,
  storeMessage,
  webhookAccount,
} from "../support/fixtures.ts";
import {
  call,
  createTenantWithApp,
  createTestEnv,
  deliverOne,
  getToken,
  postWebhook,
  type TestEnv,
} from "../support/index.ts";

const S1 = "first-root-secret-of-at-least-32-characters";
const S2 = "second-root-secret-of-at-least-32-characters";
const ISSUER = "messaging-notification-service";
const AUDIENCE = "v2";

let env: TestEnv;
let tenantId: string;
let token: string;
let senderA: SenderRow;
let senderB: SenderRow;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, env: { JWT_SECRET: S1 }, limits: { anonymous: 10_000 } });
  ({
    tenantId,
    token,
    sender: senderA,
  } = await createShop(env, "Acme", { accessToken: "provider-token-of-A", templates: true }));
  ({ sender: senderB } = await createShop(env, "Other", { accessToken: "provider-token-of-B" }));
});
afterAll(() => env.close());

function epochNow(): number {
  return Math.floor(env.clock.now().getTime() / 1000);
}

/** A correctly signed HS256 token with the claims given, made by hand (no exp unless asked). */
function handMadeToken(key: Buffer | string, claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString("base64url");
  const body = `${part({ alg: "HS256", typ: "JWT" })}.${part({
    iss: ISSUER,
    aud: AUDIENCE,
    sub: "client",
    ten: tenantId,
    scope: "messaging:read messaging:send",
    lim: [1000, 1000],
    ...claims,
  })}`;
  return `${body}.${createHmac("sha256", key).update(body).digest("base64url")}`;
}

describe("access tokens", () => {
  test("a correctly signed token without exp is refused", async () => {
    const key = deriveKey(S1, "access-token");
    const service = createTokenService(S1, env.clock);
    expect(await service.check(handMadeToken(key, {}))).toEqual({ ok: false, problem: "invalid" });
    expect((await call(env.app, "GET", "/v2/senders", { token: handMadeToken(key, {}) })).status).toBe(401);
    // The same token with an ordinary exp passes: the refusal is about exp alone.
    const withExp = handMadeToken(key, { exp: epochNow() + 60 });
    expect((await service.check(withExp)).ok).toBe(true);
    expect((await call(env.app, "GET", "/v2/senders", { token: withExp })).status).toBe(200);
  });

  test("exp further ahead than we ever issue is refused; a non-numeric exp too", async () => {
    const key = deriveKey(S1, "access-token");
    const service = createTokenService(S1, env.clock);
    const farAhead = handMadeToken(key, { exp: epochNow() + TOKEN_LIFETIME_SECONDS + 120 });
    expect(await service.check(farAhead)).toEqual({ ok: false, problem: "invalid" });
    expect(await service.check(handMadeToken(key, { exp: "9999999999" }))).toMatchObject({ ok: false });
    expect((await service.check(handMadeToken(key, { exp: epochNow() + TOKEN_LIFETIME_SECONDS }))).ok).toBe(
      true,
    );
  });

  test("tokens are signed with the HKDF access-token key, not the root secret itself", async () => {
    const issued = await createTokenService(S1, env.clock).issue({
      clientId: "client",
      tenantId,
      scopes: ["messaging:read"],
      readLimit: 1,
      sendLimit: 1,
    });
    const [header, payload, signature] = issued.token.split(".");
    const mac = (key: Buffer | string) =>
      createHmac("sha256", key).update(`${header}.${payload}`).digest("base64url");
    expect(signature).toBe(mac(deriveKey(S1, "access-token")));
    // A token made with the raw secret (how they were signed before) is refused.
    const raw = handMadeToken(S1, { exp: epochNow() + 60 });
    expect(await createTokenService(S1, env.clock).check(raw)).toEqual({ ok: false, problem: "invalid" });
  });

  test("after a rotation, tokens of a previous secret stay valid only while it is listed", async () => {
    const auth = {
      clientId: "client",
      tenantId,
      scopes: ["messaging:read" as const],
      readLimit: 1,
      sendLimit: 1,
    };
    const { token: old } = await createTokenService(S1, env.clock).issue(auth);
    expect((await createTokenService(S2, env.clock, [S1]).check(old)).ok).toBe(true);
    expect(await createTokenService(S2, env.clock).check(old)).toEqual({ ok: false, problem: "invalid" });
    // Expired stays "expired" under a previous key too.
    const later = { now: () => new Date(env.clock.now().getTime() + (TOKEN_LIFETIME_SECONDS + 5) * 1000) };
    expect(await createTokenService(S2, later, [S1]).check(old)).toEqual({ ok: false, problem: "expired" });
  });
});

describe("per-purpose keys", () => {
  test("one root secret gives a distinct, stable key per purpose", () => {
    const keys = (["access-token", "feed-cursor", "panel-csrf", "provider-token"] as const).map((purpose) =>
      deriveKey(S1, purpose).toString("hex"),
    );
    expect(new Set(keys).size).toBe(4);
    expect(deriveKey(S1, "feed-cursor").toString("hex")).toBe(keys[1]!);
    expect(deriveKey(S2, "feed-cursor").toString("hex")).not.toBe(keys[1]!);
    expect(deriveKey(S1, "feed-cursor")).toHaveLength(32);
  });
});

/** The app as it runs after a restart with other root secrets, on the same database and Redis. */
function appWith(secrets: { JWT_SECRET: string; PREVIOUS_JWT_SECRETS?: string }) {
  const { jwtSecret, previousSecrets } = loadConfig({ NODE_ENV: "development", ...secrets });
  return createApp({
    ...env.deps,
    config: { ...env.config, jwtSecret, previousSecrets },
    tokens: createTokenService(jwtSecret, env.clock, previousSecrets),
  });
}

/** Version 1 cursors, exactly as they were made before keys were derived per purpose. */
function legacyCursor(secret: string, tenant: string, position: { epoch: number; seq: number }): string {
  const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  const fixed = (value: bigint, width: number) => {
    let out = "";
    for (let i = 0; i < width; i++) {
      out = digits[Number(value % 62n)] + out;
      value /= 62n;
    }
    return out;
  };
  const key = createHmac("sha256", secret).update("feed-cursor-key:1").digest();
  const body =
    fixed(1n, 1) + fixed(1n, 1) + fixed(BigInt(position.epoch), 6) + fixed(BigInt(position.seq), 11);
  const mac = createHmac("sha256", key).update(`fd_${body}:${tenant}`).digest().subarray(0, 12);
  return `fd_${body}${fixed(BigInt(`0x${mac.toString("hex")}`), 17)}`;
}

describe("feed cursors across a rotation of the root secret", () => {
  test("a cursor issued under S1 still reads the feed after a restart with S2 and PREVIOUS=S1", async () => {
    const first = await call(env.app, "GET", "/v2/messages", { token });
    expect(first.status).toBe(200);
    const cursor = first.body.next_cursor as string;
    expect(cursor.slice(3, 4)).toBe("2");

    const rotated = appWith({ JWT_SECRET: S2, PREVIOUS_JWT_SECRETS: S1 });
    // The token issued under S1 is still good (graceful rotation), and so is the stored cursor.
    const read = await call(rotated, "GET", `/v2/messages?since=${cursor}`, { token });
    expect(read.status).toBe(200);
    // New cursors are signed with S2's key.
    expect(createFeedCursorCodec(S2).decode(tenantId, read.body.next_cursor)).toBeDefined();
    expect(createFeedCursorCodec(S1).decode(tenantId, read.body.next_cursor)).toBeUndefined();
  });

  test("without PREVIOUS_JWT_SECRETS the old cursor is refused like a bad one", async () => {
    const cursor = (await call(env.app, "GET", "/v2/messages", { token })).body.next_cursor as string;
    const rotated = appWith({ JWT_SECRET: S2 });
    const freshToken = await (async () => {
      const creds = await createTenantWithApp(env.deps, { name: "Rotation" });
      return { tenant: creds.tenant.id, token: await getToken(rotated, creds.clientId, creds.clientSecret) };
    })();
    // The old token is refused outright.
    expect((await call(rotated, "GET", "/v2/messages", { token })).status).toBe(401);
    const ownCursor = createFeedCursorCodec(S1).encode(freshToken.tenant, { epoch: 1, seq: 0 });
    const refused = await call(rotated, "GET", `/v2/messages?since=${ownCursor}`, {
      token: freshToken.token,
    });
    const tampered = await call(rotated, "GET", `/v2/messages?since=${cursor.slice(0, -1)}0`, {
      token: freshToken.token,
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: "parameter_invalid", param: "since" });
    expect({ ...refused.body.error, request_id: "" }).toEqual({ ...tampered.body.error, request_id: "" });
  });

  test("version 1 cursors (stored before this change) still decode, under S1 and after the rotation", async () => {
    const issued = (await call(env.app, "GET", "/v2/messages", { token })).body.next_cursor as string;
    const position = createFeedCursorCodec(S1).decode(tenantId, issued)!;
    const v1 = legacyCursor(S1, tenantId, position);
    expect(createFeedCursorCodec(S1).decode(tenantId, v1)).toEqual(position);
    expect((await call(env.app, "GET", `/v2/messages?since=${v1}`, { token })).status).toBe(200);
    const rotated = appWith({ JWT_SECRET: S2, PREVIOUS_JWT_SECRETS: S1 });
    expect((await call(rotated, "GET", `/v2/messages?since=${v1}`, { token })).status).toBe(200);
    // Another tenant's, or a forged one, is not.
    expect(createFeedCursorCodec(S1).decode("ten_someoneelse", v1)).toBeUndefined();
    expect(createFeedCursorCodec(S2).decode(tenantId, v1)).toBeUndefined();
  });
});

/** The real provider (the simulator over HTTP), with a note of the credentials each send carried. */
function recordingProvider(): { provider: ChannelProvider; tokens: string[] } {
  const tokens: string[] = [];
  const real = env.deps.provider;
  return {
    tokens,
    provider: {
      ...real,
      sendMessage(creds: SenderCredentials, message) {
        tokens.push(creds.accessToken);
        return real.sendMessage(creds, message);
      },
    },
  };
}

async function acceptedMessage(): Promise<string> {
  const sent = await postMessage(env.app, token, { to: freshPhone(), template: ORDER_SHIPPED });
  expect(sent.status).toBe(201);
  return sent.body.id;
}

async function storedToken(senderId: string): Promise<string> {
  const row = await env.deps.db
    .selectFrom("senders")
    .select("access_token")
    .where("id", "=", senderId)
    .executeTakeFirstOrThrow();
  return row.access_token;
}

async function setStoredToken(senderId: string, value: string): Promise<void> {
  await env.deps.db.updateTable("senders").set({ access_token: value }).where("id", "=", senderId).execute();
}

describe("provider access tokens at rest", () => {
  test("the row in Postgres does not contain the token", async () => {
    const row = await env.deps.db
      .selectFrom("senders")
      .selectAll()
      .where("id", "=", senderA.id)
      .executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain("provider-token-of-A");
    expect(row.access_token).toMatch(/^v1:[\w-]{16}\.[\w-]+$/);
  });

  test("a send still carries the right bearer to the provider", async () => {
    const id = await acceptedMessage();
    const recording = recordingProvider();
    const outcome = await deliverOne({ ...env.deps, provider: recording.provider }, id);
    expect(outcome).toBe("sent");
    expect(recording.tokens).toEqual(["provider-token-of-A"]);
    expect((await messageRow(env.deps.db, id)).status).toBe("sent");
  });

  test("a tampered or copied ciphertext fails the send at once and for good, never reaching the provider", async () => {
    const original = await storedToken(senderA.id);
    try {
      for (const broken of [
        // One flipped character of the ciphertext.
        `${original.slice(0, -2)}${original.at(-2) === "A" ? "B" : "A"}${original.at(-1)}`,
        // B's sealed token copied into A's row: bound to B's id, it does not open for A.
        await storedToken(senderB.id),
      ]) {
        await setStoredToken(senderA.id, broken);
        const id = await acceptedMessage();
        const recording = recordingProvider();
        // Not the final attempt: a retryable failure would throw here for the queue to retry.
        const outcome = await deliverOne({ ...env.deps, provider: recording.provider }, id);
        expect(outcome).toBe("failed");
        expect(recording.tokens).toEqual([]);
        const row = await messageRow(env.deps.db, id);
        expect(row).toMatchObject({ status: "failed", send_attempts: 0, provider_message_id: null });
        expect(row.failure).toMatchObject({ code: "provider_auth_failed", retryable: false });
        expect(JSON.stringify(row.failure)).not.toContain("provider-token-of");
      }
    } finally {
      await setStoredToken(senderA.id, original);
    }
  });

  test("legacy plaintext rows keep working and `sender encrypt-tokens` seals them", async () => {
    const original = await storedToken(senderA.id);
    try {
      await setStoredToken(senderA.id, "legacy-plain-token");
      const first = await acceptedMessage();
      const before = recordingProvider();
      expect(await deliverOne({ ...env.deps, provider: before.provider }, first)).toBe("sent");
      expect(before.tokens).toEqual(["legacy-plain-token"]);

      const cli = (args: string[]) =>
        runCli(args, { NODE_ENV: "development", DATABASE_URL: env.config.databaseUrl, LOG_LEVEL: "silent" });
      const run = await cli(["sender", "encrypt-tokens"]);
      expect(run.code).toBe(0);
      expect(JSON.parse(run.out)).toEqual({ object: "sender_tokens", encrypted: 1 });
      const sealed = await storedToken(senderA.id);
      expect(sealed).not.toContain("legacy-plain-token");
      expect(open(env.config.providerTokenKey, sealed, senderA.id)).toBe("legacy-plain-token");
      expect(JSON.parse((await cli(["sender", "encrypt-tokens"])).out)).toEqual({
        object: "sender_tokens",
        encrypted: 0,
      });

      const second = await acceptedMessage();
      const after = recordingProvider();
      expect(await deliverOne({ ...env.deps, provider: after.provider }, second)).toBe("sent");
      expect(after.tokens).toEqual(["legacy-plain-token"]);
    } finally {
      await setStoredToken(senderA.id, original);
    }
  });

  test("sealed values: authenticated with their context, fresh IV each time", () => {
    const key = deriveKey(S1, "provider-token");
    const a = seal(key, "secret", "snd_1");
    expect(seal(key, "secret", "snd_1")).not.toBe(a);
    expect(open(key, a, "snd_1")).toBe("secret");
    expect(() => open(key, a, "snd_2")).toThrow();
    expect(() => open(deriveKey(S2, "provider-token"), a, "snd_1")).toThrow();
  });

  test("PROVIDER_TOKEN_KEY: required unless NODE_ENV=development; 32 bytes as hex or base64", () => {
    const production = {
      NODE_ENV: "production",
      JWT_SECRET: S1,
      WHATSAPP_APP_SECRET: "app-secret",
      WHATSAPP_VERIFY_TOKEN: "verify-token",
    };
    expect(() => loadConfig(production)).toThrow(
      new ConfigError("PROVIDER_TOKEN_KEY is required unless NODE_ENV=development"),
    );
    expect(() => loadConfig({ ...production, NODE_ENV: "" })).toThrow("PROVIDER_TOKEN_KEY");
    const hex = "0f".repeat(32);
    expect(loadConfig({ ...production, PROVIDER_TOKEN_KEY: hex }).providerTokenKey.toString("hex")).toBe(hex);
    const base64 = Buffer.alloc(32, 7).toString("base64");
    expect(loadConfig({ ...production, PROVIDER_TOKEN_KEY: base64 }).providerTokenKey).toEqual(
      Buffer.alloc(32, 7),
    );
    for (const bad of ["0f".repeat(31), Buffer.alloc(16).toString("base64"), "not a key!"]) {
      expect(() => loadConfig({ ...production, PROVIDER_TOKEN_KEY: bad })).toThrow(
        "PROVIDER_TOKEN_KEY must be 32 bytes",
      );
    }
    expect(() => loadConfig({ NODE_ENV: "development", PREVIOUS_JWT_SECRETS: `${S1},short` })).toThrow(
      "PREVIOUS_JWT_SECRETS",
    );
    expect(
      loadConfig({ NODE_ENV: "development", PREVIOUS_JWT_SECRETS: ` ${S1} , ${S2} ` }).previousSecrets,
    ).toEqual([S1, S2]);
  });
});

describe("webhook verification token", () => {
  test("GET answers the challenge for the exact token only", async () => {
    const verify = (tokenValue: string) =>
      call(
        env.app,
        "GET",
        `/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=${encodeURIComponent(tokenValue)}&hub.challenge=1158201444`,
      );
    const ok = await verify(env.config.whatsappVerifyToken);
    expect({ status: ok.status, text: ok.text }).toEqual({ status: 200, text: "1158201444" });
    for (const wrong of ["", "dev-verify-toke", `${env.config.whatsappVerifyToken}x`, "DEV-VERIFY-TOKEN"]) {
      expect((await verify(wrong)).status).toBe(403);
    }
  });
});

describe("status events belong to the webhook's phone_number_id", () => {
  async function outboundOfA(wamid: string | null, inDoubt = false): Promise<string> {
    return storeMessage(env.deps.db, {
      tenantId,
      senderId: senderA.id,
      phone: "+4915100000701",
      content: { kind: "text", body: "hello" },
      providerMessageId: wamid,
      status: wamid ? "sent" : "accepted",
      sendStartedAt: inDoubt ? env.clock.now() : null,
    });
  }

  /** A correctly signed status webhook naming `sender`'s phone number. */
  async function statusVia(
    sender: SenderRow,
    status: { id: string; status: DeliveryStatus; biz_opaque_callback_data?: string },
  ) {
    const webhook = buildWebhook(webhookAccount(sender), {
      statuses: [{ recipient_id: "4915100000701", timestamp: webhookTimestamp(env.clock.now()), ...status }],
    });
    const result = await postWebhook(env, webhook);
    expect(result.status).toBe(200);
    await applyStatusEvents(env.deps.db, env.clock, status.id);
  }

  test("by provider id: B's number cannot move A's message; A's number can", async () => {
    const wamid = `wamid.hostile-${Math.random().toString(36).slice(2)}`;
    const id = await outboundOfA(wamid);
    await statusVia(senderB, { id: wamid, status: "read" });
    expect(await messageRow(env.deps.db, id)).toMatchObject({ status: "sent", provider_message_id: wamid });
    // Settled without effect (deleted like an applied event), so the sweeper does not nudge it forever.
    expect(await statusEventsOf(env.deps.db, wamid)).toEqual([]);

    // The same status through A's number is stored (not a duplicate of B's) and applies.
    await statusVia(senderA, { id: wamid, status: "read" });
    expect(await messageRow(env.deps.db, id)).toMatchObject({ status: "read", provider_message_id: wamid });
  });

  test("by echoed message id: B's number cannot make A's in-doubt send adopt its id; A's number can", async () => {
    const id = await outboundOfA(null, true);
    const forged = `wamid.forged-${Math.random().toString(36).slice(2)}`;
    await statusVia(senderB, { id: forged, status: "delivered", biz_opaque_callback_data: id });
    expect(await messageRow(env.deps.db, id)).toMatchObject({
      status: "accepted",
      provider_message_id: null,
    });
    // The send worker's in-doubt check does not take B's echo as proof either.
    await expect(deliverOne(env.deps, id)).rejects.toBeInstanceOf(SendNotYetPossible);

    const genuine = `wamid.genuine-${Math.random().toString(36).slice(2)}`;
    await statusVia(senderA, { id: genuine, status: "delivered", biz_opaque_callback_data: id });
    expect(await messageRow(env.deps.db, id)).toMatchObject({
      status: "delivered",
      provider_message_id: genuine,
    });
  });

  test("events stored before they carried a sender apply as before", async () => {
    const wamid = `wamid.legacy-${Math.random().toString(36).slice(2)}`;
    const id = await outboundOfA(wamid);
    await env.deps.db
      .insertInto("status_events")
      .values({
        provider_message_id: wamid,
        status: "delivered",
        provider_timestamp: new Date(),
        errors: null,
        client_reference: null,
        sender_id: null,
      })
      .execute();
    await applyStatusEvents(env.deps.db, env.clock, wamid);
    expect((await messageRow(env.deps.db, id)).status).toBe("delivered");
  });
});
