/**
 * Issue 20: a route's policies (limit, body cap, errors, send admission) are the matched route's own,
 * so no request shape can reach a handler without them. At ea91cc0 a Host of 1 to 3 characters made
 * Elysia route `/v2/v2/messages` as `/v2/messages` while the pipeline, reading the path itself,
 * applied no admission: sends went out past the send limit and the daily quota.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import net from "node:net";
import { Elysia } from "elysia";
import { setRequestState } from "../../src/http/request-state.ts";
import { createMessageAcceptor } from "../../src/messages/accept.ts";
import {
  createQuotaReservation,
  createSendAdmission,
  outboundSending,
} from "../../src/messages/admission.ts";
import { messageRoutes } from "../../src/messages/routes.ts";
import { assertEveryRouteHasPolicy } from "../../src/pipeline/request-pipeline.ts";
import { createShop, freshPhone, ORDER_SHIPPED } from "../support/fixtures.ts";
import { call, createTestEnv, nextSecond, type TestEnv } from "../support/index.ts";

let env: TestEnv;
const SHORT_HOSTS = ["a", "ab", "abc"];

/** Request targets that put `path` where a router counting 11 characters of `http://` + host looks. */
function disguises(host: string, path: string): string[] {
  return [`/${"x".repeat(3 - host.length)}${path}`, `/v2${path}`, `/x${path}`];
}

/** One request through the app's own handler (Elysia's general router), with a Host of our choosing. */
async function viaHost(host: string, method: string, target: string, init: RequestInit = {}) {
  const response = await env.app.handle(new Request(`http://${host}${target}`, { method, ...init }));
  return { status: response.status, text: await response.text() };
}

/** One raw HTTP/1.1 request to the listening api (Bun's own router first, Elysia's behind it). */
function rawRequest(port: number, lines: string[], body = ""): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1", () => {
      socket.write(
        `${[...lines, `content-length: ${Buffer.byteLength(body)}`, "connection: close"].join("\r\n")}\r\n\r\n${body}`,
      );
    });
    let data = "";
    socket.on("data", (chunk) => {
      data += chunk;
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0);
      resolve({ status, text: data.slice(data.indexOf("\r\n\r\n") + 4) });
    });
  });
}

let shops = 0;

function sendCredentials(options: { sendLimit: number; dailyQuota?: number }) {
  return createShop(env, `Shop ${++shops}`, { ...options, templates: true });
}

async function messageCount(tenantId: string): Promise<number> {
  const row = await env.deps.db
    .selectFrom("messages")
    .select((eb) => eb.fn.countAll<string>().as("n"))
    .where("tenant_id", "=", tenantId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, limits: { anonymous: 10_000, token: 10_000 } });
});
afterAll(() => env.close());

describe("every route declares its policy", () => {
  test("the app's routes all have one, and a route without one is refused when the app is built", () => {
    expect(() => assertEveryRouteHasPolicy(env.app.routes)).not.toThrow();
    const bare = new Elysia().get("/forgotten", () => "ok");
    expect(() => assertEveryRouteHasPolicy(bare.routes)).toThrow("GET /forgotten");
  });
});

describe("the router and the pipeline read one path", () => {
  test("a disguised path reaches no route, under every short Host, in every static route", async () => {
    const statics = env.app.routes.filter((route) => !/[:*]/.test(route.path) && route.method !== "ALL");
    for (const route of statics) {
      for (const host of SHORT_HOSTS) {
        for (const target of disguises(host, route.path)) {
          const { status } = await viaHost(host, route.method, target);
          expect({ route: route.path, host, target, status }).toEqual({
            route: route.path,
            host,
            target,
            status: 404,
          });
        }
      }
    }
  });

  test("a short Host is read like any other: the same route, the same answer", async () => {
    for (const host of SHORT_HOSTS) {
      expect((await viaHost(host, "GET", "/healthz")).status).toBe(200);
      expect((await viaHost(host, "GET", "/v2/senders")).status).toBe(401);
    }
  });

  test("sends under disguised paths are never accepted: the send limit and the quota hold", async () => {
    const creds = await sendCredentials({ sendLimit: 3, dailyQuota: 2 });
    await nextSecond();
    const statuses: number[] = [];
    for (const host of SHORT_HOSTS) {
      for (const target of disguises(host, "/v2/messages")) {
        const result = await viaHost(host, "POST", target, {
          headers: { authorization: `Bearer ${creds.token}`, "content-type": "application/json" },
          body: JSON.stringify({ to: freshPhone(), template: ORDER_SHIPPED }),
        });
        statuses.push(result.status);
      }
    }
    expect(new Set(statuses)).toEqual(new Set([404]));
    expect(await messageCount(creds.tenantId)).toBe(0);

    // The plain path under a short Host is admitted: 2 sends fit the quota, the third does not.
    const plain: number[] = [];
    for (const host of SHORT_HOSTS) {
      await nextSecond();
      const result = await viaHost(host, "POST", "/v2/messages", {
        headers: { authorization: `Bearer ${creds.token}`, "content-type": "application/json" },
        body: JSON.stringify({ to: freshPhone(), template: ORDER_SHIPPED }),
      });
      plain.push(result.status);
    }
    expect(plain).toEqual([201, 201, 429]);
    expect(await messageCount(creds.tenantId)).toBe(2);
  });

  test("over a socket: disguised targets and unreadable Hosts are refused before any work", async () => {
    const port = Number(new URL(env.apiUrl).port);
    const creds = await sendCredentials({ sendLimit: 1000 });
    const body = JSON.stringify({ to: freshPhone(), template: ORDER_SHIPPED });
    const send = (target: string, host: string) =>
      rawRequest(
        port,
        [
          `POST ${target} HTTP/1.1`,
          `host: ${host}`,
          `authorization: Bearer ${creds.token}`,
          "content-type: application/json",
        ],
        body,
      );
    for (const host of SHORT_HOSTS) {
      for (const target of disguises(host, "/v2/messages"))
        expect((await send(target, host)).status).toBe(404);
    }
    for (const host of ["a?b", "a#b", "a/b", ""]) {
      const result = await send("/v2/messages", host);
      expect(result.status).toBe(400);
      expect(JSON.parse(result.text).error.code).toBe("parameter_invalid");
    }
    const fragment = await rawRequest(port, ["GET /v2/contacts/ctc_1#x HTTP/1.1", "host: localhost"]);
    expect(fragment.status).toBe(400);
    expect(await messageCount(creds.tenantId)).toBe(0);
    expect((await send("/v2/messages", "a")).status).toBe(201);
  });

  test("path-keyed limits hold under disguised paths: token, panel, ops, webhook, media", async () => {
    // Each disguised request is a 404 of the read limit, never its route: no token issued, no
    // webhook body parsed, no upload.
    for (const host of SHORT_HOSTS) {
      for (const [method, path] of [
        ["POST", "/v2/oauth/token"],
        ["GET", "/panel/sign-in"],
        ["GET", "/metrics"],
        ["POST", "/webhooks/whatsapp"],
        ["POST", "/v2/media"],
      ] as const) {
        for (const target of disguises(host, path)) {
          const result = await viaHost(host, method, target, {
            headers: { "content-type": "application/json" },
            body: method === "POST" ? "{}" : undefined,
          });
          expect({ target, status: result.status }).toEqual({ target, status: 404 });
          expect(result.text).not.toContain("access_token");
        }
      }
    }
  });
});

describe("POST /messages fails closed", () => {
  test("a send that reaches its route without an admission is admitted there: its limit holds", async () => {
    const creds = await sendCredentials({ sendLimit: 1 });
    const quota = { ...env.deps, defaultDailyQuota: 1000 };
    const sending = outboundSending(createSendAdmission(quota), createMessageAcceptor(env.deps), {
      ...env.deps,
      reserveQuota: createQuotaReservation(quota),
    });
    // A stand-in for a pipeline that forgot the admission: it authenticates and nothing else.
    const auth = {
      clientId: creds.clientId,
      tenantId: creds.tenantId,
      scopes: ["messaging:send"] as const,
      readLimit: 1000,
      sendLimit: 1,
    };
    let requests = 0;
    const bare = new Elysia()
      .onRequest(({ request }) => {
        setRequestState(request, {
          requestId: `req_${++requests}`,
          startedAt: 0,
          tokenGiven: true,
          clientIp: () => "local",
          auth: { ...auth, scopes: [...auth.scopes] },
        });
      })
      .use(messageRoutes(sending, env.config.publicBaseUrl));
    await nextSecond();
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await bare.handle(
        new Request("http://localhost/messages", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ to: freshPhone(), template: ORDER_SHIPPED }),
        }),
      );
      statuses.push(response.status);
    }
    expect(statuses[0]).toBe(201);
    expect(statuses.slice(1).every((status) => status !== 201)).toBe(true);
    expect(await messageCount(creds.tenantId)).toBe(1);
  });
});

test("call() still works for the plain path", async () => {
  expect((await call(env.app, "GET", "/healthz")).status).toBe(200);
});
