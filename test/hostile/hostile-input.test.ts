import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import {
  FORM_BODY_LIMIT,
  JSON_BODY_LIMIT,
  jsonDepthExceeds,
  WEBHOOK_BODY_LIMIT,
} from "../../src/http/body.ts";
import {
  appWithLimits,
  call,
  createTenantWithApp,
  createTestEnv,
  getToken,
  type TestEnv,
} from "../support/index.ts";

/**
 * Issue 11's hostile request shapes, replayed: each must be refused with the SPEC envelope, before
 * the expensive step (reading, parsing, serializing), and without slowing anyone else. Assertions
 * are on outcomes and on what was (not) parsed or serialized, never on milliseconds.
 */

const MB = 1024 * 1024;
/** 100 KB of nesting: 50,000 levels, which froze the api for 22 s before. */
const NESTED = `${"[".repeat(50_000)}${"]".repeat(50_000)}`;

let env: TestEnv;
let token: string;

/** Every JSON.parse input and JSON.stringify output of at least `min` characters while `run` runs. */
async function bigJsonWork<T>(run: () => Promise<T>, min = 50_000) {
  const parsed: number[] = [];
  const serialized: number[] = [];
  const { parse, stringify } = JSON;
  JSON.parse = ((text: string, reviver?: never) => {
    if (typeof text === "string" && text.length >= min) parsed.push(text.length);
    return parse(text, reviver);
  }) as typeof JSON.parse;
  JSON.stringify = ((value: unknown, replacer?: never, space?: never) => {
    const out = stringify(value, replacer, space);
    if (typeof out === "string" && out.length >= min) serialized.push(out.length);
    return out;
  }) as typeof JSON.stringify;
  try {
    return { result: await run(), parsed, serialized };
  } finally {
    JSON.parse = parse;
    JSON.stringify = stringify;
  }
}

/** A body stream of `size` bytes that records how much of it the server pulled. */
function countedBody(size: number, fill = 0x61) {
  const chunk = new Uint8Array(64 * 1024).fill(fill);
  const pulled = { bytes: 0 };
  let remaining = size;
  const body = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (remaining <= 0) {
          controller.close();
          return;
        }
        const next = remaining >= chunk.length ? chunk : chunk.subarray(0, remaining);
        remaining -= next.length;
        pulled.bytes += next.length;
        controller.enqueue(next);
      },
    },
    // Nothing is pulled until the server reads.
    { highWaterMark: 0 },
  );
  return { body, pulled };
}

beforeAll(async () => {
  // One proxy of ours in front: X-Forwarded-For's last address is the client (tests vary it).
  env = await createTestEnv({ env: { TRUST_PROXY: "1" } });
  const { clientId, clientSecret } = await createTenantWithApp(env.deps);
  token = await getToken(env.app, clientId, clientSecret);
});
afterAll(() => env.close());

describe("deeply nested JSON", () => {
  test("the depth check counts brackets outside strings only, and stops early", () => {
    expect(jsonDepthExceeds(new TextEncoder().encode(NESTED), 32)).toBe(true);
    expect(jsonDepthExceeds(new TextEncoder().encode(`${"[".repeat(32)}${"]".repeat(32)}`), 32)).toBe(false);
    expect(jsonDepthExceeds(new TextEncoder().encode(`{"a":"${"[".repeat(100)}\\"["}`), 32)).toBe(false);
  });

  test("POST /v2/oauth/token with 100 KB of brackets: 400 invalid_json, never parsed", async () => {
    const { result, parsed } = await bigJsonWork(() =>
      call(env.app, "POST", "/v2/oauth/token", {
        rawBody: NESTED,
        headers: { "content-type": "application/json" },
      }),
    );
    expect(result.status).toBe(400);
    expect(result.body.error).toBe("invalid_request");
    expect(result.body.error_description).toContain("nested deeper than 32 levels");
    expect(parsed).toEqual([]);
  });

  test("POST /v2/messages with a valid token: 400 invalid_json in the envelope, never parsed", async () => {
    const { result, parsed } = await bigJsonWork(() =>
      call(env.app, "POST", "/v2/messages", {
        rawBody: NESTED,
        token,
        headers: { "content-type": "application/json", "idempotency-key": "nested-1" },
      }),
    );
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe("invalid_json");
    expect(parsed).toEqual([]);
  });

  test("the webhook does not parse an unsigned body at all, however it is nested", async () => {
    const { result, parsed } = await bigJsonWork(() =>
      call(env.app, "POST", "/webhooks/whatsapp", {
        rawBody: `{"object":"whatsapp_business_account","x":${"[".repeat(400_000)}${"]".repeat(400_000)}}`,
        headers: { "content-type": "application/json", "x-forwarded-for": "10.9.9.9" },
      }),
    );
    expect(result.status).toBe(401);
    expect(parsed).toEqual([]);
  });
});

describe("validation errors never serialize the offending value whole", () => {
  test("a 1 MB array where a string belongs: a short message, nothing large serialized", async () => {
    const wide = { to: Array.from({ length: 150_000 }, (_, i) => i), body: "hi" };
    const rawBody = JSON.stringify(wide);
    expect(rawBody.length).toBeLessThan(JSON_BODY_LIMIT);
    const { result, serialized } = await bigJsonWork(() =>
      call(env.app, "POST", "/v2/messages", {
        rawBody,
        token,
        headers: { "content-type": "application/json", "idempotency-key": "wide-1" },
      }),
    );
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe("parameter_invalid");
    expect(result.body.error.param).toBe("to");
    expect(result.text.length).toBeLessThan(1000);
    expect(serialized).toEqual([]);
  });

  test("an unknown parameter named by a 500 KB key is echoed capped", async () => {
    const key = "k".repeat(500_000);
    const result = await call(env.app, "POST", "/v2/messages", {
      rawBody: `{"to":"+4915123456789","body":"hi","${key}":1}`,
      token,
      headers: { "content-type": "application/json", "idempotency-key": "key-1" },
    });
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe("parameter_unknown");
    expect(result.text.length).toBeLessThan(1500);
  });

  test("the token endpoint: a repeated field 200,000 times is a short 400", async () => {
    const rawBody = `grant_type=client_credentials${"&grant_type=x".repeat(70_000)}`;
    const { result, serialized } = await bigJsonWork(() =>
      call(env.app, "POST", "/v2/oauth/token", {
        rawBody,
        headers: { "content-type": "application/x-www-form-urlencoded" },
      }),
    );
    expect(result.status).toBe(400);
    expect(result.text.length).toBeLessThan(1000);
    expect(serialized).toEqual([]);
  });
});

describe("every route's body has a cap, chunked or not, and is refused before it is read", () => {
  const routes: { path: string; limit: number; status: number }[] = [
    { path: "/panel/sign-in", limit: FORM_BODY_LIMIT, status: 413 },
    { path: "/webhooks/whatsapp", limit: WEBHOOK_BODY_LIMIT, status: 413 },
    { path: "/ops/queues/api/queues", limit: FORM_BODY_LIMIT, status: 413 },
    { path: "/v2/oauth/token", limit: JSON_BODY_LIMIT, status: 413 },
  ];

  for (const route of routes) {
    test(`${route.path}: a declared 30 MB body is refused without a byte read`, async () => {
      const { body, pulled } = countedBody(30 * MB);
      const response = await env.app.handle(
        new Request(`http://localhost${route.path}`, {
          method: "POST",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            "content-length": String(30 * MB),
            "x-forwarded-for": "10.1.1.1",
          },
          body,
        }),
      );
      expect(response.status).toBe(route.status);
      expect(pulled.bytes).toBe(0);
    });

    test(`${route.path}: a chunked 30 MB body is refused once it passes the cap`, async () => {
      const { body, pulled } = countedBody(30 * MB);
      const response = await env.app.handle(
        new Request(`http://localhost${route.path}`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": "10.1.1.2" },
          body,
        }),
      );
      expect(response.status).toBe(route.status);
      expect(pulled.bytes).toBeLessThanOrEqual(route.limit + 256 * 1024);
    });
  }

  test("multipart is refused outside POST /v2/media, unread", async () => {
    const { body, pulled } = countedBody(2 * MB);
    const response = await env.app.handle(
      new Request("http://localhost/panel/sign-in", {
        method: "POST",
        headers: { "content-type": "multipart/form-data; boundary=x" },
        body,
      }),
    );
    expect(response.status).toBe(400);
    expect(pulled.bytes).toBeLessThanOrEqual(256 * 1024);
  });
});

describe("limits before work", () => {
  test("the token endpoint's per-IP limit applies before the body is read or validated", async () => {
    const strict = await appWithLimits(env, { tokenPerIp: 10 });
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      const result = await call(strict, "POST", "/v2/oauth/token", {
        rawBody: i % 2 === 0 ? NESTED : `grant_type=client_credentials&client_id=cid_${i}&client_secret=x`,
        headers: {
          "content-type": i % 2 === 0 ? "application/json" : "application/x-www-form-urlencoded",
          "x-forwarded-for": "10.2.2.2",
        },
      });
      statuses.push(result.status);
      if (result.status === 429) {
        expect(result.body.error).toBe("rate_limit_exceeded");
        expect(result.headers.get("retry-after")).toMatch(/^\d+$/);
      }
    }
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(9);
    expect(statuses).not.toContain(500);
  });

  test("a trailing slash is the same path to every limit (Elysia routes /x/ to /x)", async () => {
    const strict = await appWithLimits(env, { tokenPerIp: 3 });
    const tokens: number[] = [];
    for (let i = 0; i < 5; i++) {
      const result = await call(strict, "POST", "/v2/oauth/token/", {
        rawBody: `grant_type=client_credentials&client_id=cid_${i}&client_secret=x`,
        headers: { "content-type": "application/x-www-form-urlencoded", "x-forwarded-for": "10.2.2.3" },
      });
      tokens.push(result.status);
      // Still the token endpoint's own error shape.
      if (result.status === 401) expect(result.body.error).toBe("invalid_client");
    }
    expect(tokens.slice(3)).toEqual([429, 429]);
    // The upload is a send: the send limit's headers, not the read limit's.
    const media = await call(env.app, "POST", "/v2/media/", { token, rawBody: "", headers: {} });
    const direct = await call(env.app, "POST", "/v2/media", { token, rawBody: "", headers: {} });
    expect(media.headers.get("ratelimit-limit")).toBe(direct.headers.get("ratelimit-limit"));
    expect(media.status).toBe(direct.status);
  });

  test("the panel and the operator endpoints are limited per IP", async () => {
    const strict = await appWithLimits(env, { panelPerIp: 5, opsPerIp: 5 });
    const panel: number[] = [];
    const ops: number[] = [];
    for (let i = 0; i < 8; i++) {
      panel.push((await call(strict, "GET", "/panel/sign-in")).status);
      ops.push((await call(strict, "GET", "/metrics")).status);
    }
    expect(panel.slice(0, 5).every((s) => s === 200)).toBe(true);
    expect(panel.slice(5)).toEqual([429, 429, 429]);
    expect(ops.slice(5)).toEqual([429, 429, 429]);
    // Counted under their own limit, not as API callers without a token.
    const refused = await env.deps.metrics.registry.getSingleMetricAsString("http_rate_limited_total");
    expect(refused).toMatch(/kind="panel"[^\n]*} 3/);
    expect(refused).toMatch(/kind="ops"[^\n]*} 3/);
  });

  test("a webhook caller that keeps failing the signature is refused before its body is read", async () => {
    const app = createApp(env.deps);
    const ip = "10.3.3.3";
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) {
      const result = await call(app, "POST", "/webhooks/whatsapp", {
        rawBody: '{"object":"whatsapp_business_account","entry":[]}',
        headers: { "content-type": "application/json", "x-forwarded-for": ip },
      });
      statuses.push(result.status);
    }
    expect(new Set(statuses)).toEqual(new Set([401]));
    const { body, pulled } = countedBody(2 * MB);
    const refused = await app.handle(
      new Request("http://localhost/webhooks/whatsapp", {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": ip },
        body,
      }),
    );
    expect(refused.status).toBe(429);
    expect(refused.headers.get("retry-after")).toMatch(/^\d+$/);
    expect(pulled.bytes).toBe(0);
    // Another address (the provider's) is not held up.
    const other = await call(app, "POST", "/webhooks/whatsapp", {
      rawBody: "{}",
      headers: { "content-type": "application/json", "x-forwarded-for": "10.3.3.4" },
    });
    expect(other.status).toBe(401);
  });
});

describe("the api keeps serving while hostile bodies are refused", () => {
  test("/healthz answers while four clients send nested JSON and 30 MB bodies", async () => {
    const app = createApp({ ...env.deps, limits: { ...env.deps.limits, tokenPerIp: 1_000_000 } });
    app.listen({ port: 0, hostname: "127.0.0.1" });
    const base = `http://127.0.0.1:${app.server?.port}`;
    try {
      let stop = false;
      const hostile: number[] = [];
      const clients = [0, 1, 2, 3].map(async (n) => {
        while (!stop) {
          const big = n % 2 === 1;
          const response = await fetch(`${base}${big ? "/panel/sign-in" : "/v2/oauth/token"}`, {
            method: "POST",
            headers: {
              "content-type": big ? "application/x-www-form-urlencoded" : "application/json",
              ...(big && { "content-length": String(30 * MB) }),
            },
            body: big ? new Uint8Array(30 * MB) : NESTED,
          }).catch(() => undefined);
          if (response) {
            hostile.push(response.status);
            await response.arrayBuffer().catch(() => undefined);
          }
        }
      });
      const health: number[] = [];
      for (let i = 0; i < 20; i++) {
        health.push((await fetch(`${base}/healthz`)).status);
        await Bun.sleep(20);
      }
      stop = true;
      await Promise.all(clients);
      expect(health.every((s) => s === 200)).toBe(true);
      expect(hostile.length).toBeGreaterThan(4);
      expect(hostile.every((s) => s === 400 || s === 413)).toBe(true);
    } finally {
      await app.stop(true);
    }
  });
});
