import { afterEach, describe, expect, test } from "bun:test";
import { inspect } from "node:util";
import { ApiError, MessagingClient, type MessagingClientOptions } from "../src/index.ts";
import type { FetchLike } from "../src/transport.ts";

/**
 * Findings of the SDK's security review: the secret and the token never show when a client is
 * logged or serialised, credentials never follow a redirect, and 429 waits are jittered and capped.
 * No service of the project: a stub fetch, or small Bun.serve servers, answer.
 */

const SECRET = "csec_test_9f3a7c1e5b2d4068a1c3e5f7";
const TOKEN = "at_test_4b6d8f0a2c4e6081b3d5f7a9";

const json = (body: unknown, init: ResponseInit = {}) =>
  new Response(JSON.stringify(body), {
    ...init,
    headers: { "content-type": "application/json", ...(init.headers as Record<string, string>) },
  });
const tokenAnswer = () => json({ access_token: TOKEN, token_type: "bearer", expires_in: 3600 });
const rateLimited = (retryAfter: string) =>
  json(
    { error: { type: "rate_limit_error", code: "rate_limit_exceeded", message: "Too many requests" } },
    { status: 429, headers: { "retry-after": retryAfter } },
  );
const list = (data: unknown[] = []) => json({ object: "list", url: "/v2/senders", has_more: false, data });

function clientWith(fetch: FetchLike, options: Partial<MessagingClientOptions> = {}) {
  return new MessagingClient({
    baseUrl: "https://api.example.test/v2",
    clientId: "cid_test",
    clientSecret: SECRET,
    fetch,
    ...options,
  });
}

/** Every string reachable through own properties (descriptors read, getters never called). */
function reachableStrings(root: unknown): string[] {
  const out: string[] = [];
  const seen = new Set<unknown>();
  const visit = (value: unknown) => {
    if (typeof value === "string") {
      out.push(value);
      return;
    }
    if ((typeof value !== "object" && typeof value !== "function") || value === null || seen.has(value))
      return;
    seen.add(value);
    for (const key of Reflect.ownKeys(value)) {
      if (typeof key === "string") out.push(key);
      const descriptor = Object.getOwnPropertyDescriptor(value, key);
      if (descriptor && "value" in descriptor) visit(descriptor.value);
    }
    for (const key of Object.keys(value)) visit((value as Record<string, unknown>)[key]);
  };
  visit(root);
  return out;
}

const servers: ReturnType<typeof Bun.serve>[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.stop(true);
});

/** A client with the real fetch, against a server of `serve`. */
function clientAt(origin: string) {
  return new MessagingClient({ baseUrl: `${origin}/v2`, clientId: "cid_test", clientSecret: SECRET });
}

/** A server on a free port; every request it gets is recorded. */
function serve(handler: (url: URL) => Response) {
  const calls: { method: string; path: string; body: string }[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const url = new URL(request.url);
      const body = await request.text();
      calls.push({ method: request.method, path: url.pathname, body });
      return handler(url);
    },
  });
  servers.push(server);
  return { origin: `http://127.0.0.1:${server.port}`, calls };
}

describe("the secret and the token stay out of logs", () => {
  test("inspect, JSON.stringify and property walks of a client show neither", async () => {
    const seenInit: RequestInit[] = [];
    const client = clientWith(async (input, init) => {
      seenInit.push(init ?? {});
      const path = new URL(input).pathname;
      if (path === "/v2/oauth/token") {
        // Behaviour unchanged: the secret still goes in the token request.
        expect(JSON.parse(String(init?.body)).client_secret).toBe(SECRET);
        return tokenAnswer();
      }
      expect(new Headers(init?.headers).get("authorization")).toBe(`Bearer ${TOKEN}`);
      return list();
    });
    expect(await client.senders.list()).toHaveLength(0);
    expect(seenInit).toHaveLength(2);

    const transport = (client as unknown as { transport: object }).transport;
    for (const target of [client, transport]) {
      const renderings = [
        JSON.stringify(target),
        Bun.inspect(target, { depth: 10 }),
        inspect(target, { depth: 10, showHidden: true, getters: true }),
        String(target),
        `${reachableStrings(target).join("\n")}`,
      ];
      for (const text of renderings) {
        expect(text).not.toContain(SECRET);
        expect(text).not.toContain(TOKEN);
      }
    }
    // Still a useful log line: the non-secret options show.
    expect(Bun.inspect(client, { depth: 10 })).toContain("cid_test");
  });
});

describe("credentials never follow a redirect", () => {
  test("a token endpoint redirecting to another origin: ApiError, the other origin never called", async () => {
    const elsewhere = serve(() => tokenAnswer());
    const api = serve((url) =>
      url.pathname === "/v2/oauth/token"
        ? new Response(null, { status: 307, headers: { location: `${elsewhere.origin}/steal` } })
        : list(),
    );
    const client = clientAt(api.origin);

    const error = await client.senders.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 307, type: "api_error", code: "unexpected_redirect" });
    expect((error as ApiError).message).toContain("307");
    expect((error as ApiError).message).toContain(`${elsewhere.origin}/steal`);
    expect(elsewhere.calls).toHaveLength(0);
    // Thrown at once: not retried, and no API call without a token.
    expect(api.calls.map((c) => `${c.method} ${c.path}`)).toEqual(["POST /v2/oauth/token"]);
  });

  test("an API call answered 302 is not followed, nor retried", async () => {
    const elsewhere = serve(() => list());
    const api = serve((url) =>
      url.pathname === "/v2/oauth/token"
        ? tokenAnswer()
        : new Response(null, { status: 302, headers: { location: `${elsewhere.origin}/v2/senders` } }),
    );
    const client = clientAt(api.origin);

    const error = await client.senders.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 302, code: "unexpected_redirect" });
    expect(elsewhere.calls).toHaveLength(0);
    expect(api.calls.map((c) => `${c.method} ${c.path}`)).toEqual([
      "POST /v2/oauth/token",
      "GET /v2/senders",
    ]);
  });

  test("every request asks for redirect: manual, and a browser's opaque redirect is thrown too", async () => {
    const redirectModes: (string | undefined)[] = [];
    const client = clientWith(async (input, init) => {
      redirectModes.push(init?.redirect);
      if (new URL(input).pathname === "/v2/oauth/token") return tokenAnswer();
      // What a browser's fetch gives with redirect: "manual" (the constructor refuses status 0).
      const opaque = new Response(null, { status: 200 });
      Object.defineProperties(opaque, {
        type: { value: "opaqueredirect" },
        status: { value: 0 },
        ok: { value: false },
      });
      return opaque;
    });
    const error = await client.senders.list().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 0, code: "unexpected_redirect" });
    expect(redirectModes).toEqual(["manual", "manual"]);
  });
});

describe("429 rate_limit_exceeded waits are jittered and capped", () => {
  test("concurrent callers told Retry-After: 1 do not all come back at the same instant", async () => {
    const callers = 8;
    const limitedAt = new Map<string, number>();
    const retriedAt = new Map<string, number>();
    const client = clientWith(async (input, init) => {
      if (new URL(input).pathname === "/v2/oauth/token") return tokenAnswer();
      const key = new Headers(init?.headers).get("idempotency-key")!;
      if (!limitedAt.has(key)) {
        limitedAt.set(key, performance.now());
        return rateLimited("1");
      }
      retriedAt.set(key, performance.now());
      return json({ id: `msg_${key}` }, { status: 201 });
    });
    const sends = Array.from({ length: callers }, (_, i) =>
      client.messages.send(
        { to: "+4915123456789", template: { name: "t", language: "en" } },
        { idempotencyKey: `k${i}` },
      ),
    );
    await Promise.all(sends);

    expect(retriedAt.size).toBe(callers);
    const waits = [...retriedAt].map(([key, at]) => at - limitedAt.get(key)!);
    for (const wait of waits) {
      // Retry-After is honoured, plus at most the 1 s jitter (and some timer slack).
      expect(wait).toBeGreaterThanOrEqual(990);
      expect(wait).toBeLessThan(2_300);
    }
    const times = [...retriedAt.values()];
    // Without jitter all eight wake within a few ms of each other; with up to 1 s they spread.
    expect(Math.max(...times) - Math.min(...times)).toBeGreaterThan(100);
  }, 10_000);

  test("a Retry-After longer than maxRateLimitDelayMs waits the cap", async () => {
    const attempts: number[] = [];
    const client = clientWith(
      async (input) => {
        if (new URL(input).pathname === "/v2/oauth/token") return tokenAnswer();
        attempts.push(performance.now());
        return attempts.length === 1 ? rateLimited("3600") : list();
      },
      { retry: { maxRateLimitDelayMs: 200 } },
    );
    // An hour-long wait (the old behaviour) is cut short by the signal, so this fails fast.
    const deadline = AbortSignal.timeout(3_000);
    const result = await client.messages
      .send({ to: "+4915123456789", template: { name: "t", language: "en" } }, { signal: deadline })
      .then(
        () => "sent",
        (error: unknown) => error,
      );
    expect(result).toBe("sent");
    expect(attempts).toHaveLength(2);
    const wait = attempts[1]! - attempts[0]!;
    expect(wait).toBeGreaterThanOrEqual(190);
    expect(wait).toBeLessThan(1_000);
  });
});
