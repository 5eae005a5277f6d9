import { afterAll, beforeAll, expect } from "bun:test";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Worker } from "bullmq";
import { type App, createApp } from "../../src/app.ts";
import type { AppDeps } from "../../src/app-deps.ts";
import { createApplication } from "../../src/applications/service.ts";
import { SIGNATURE_HEADER, signPayload } from "../../src/channel/signature.ts";
import { ManualClock } from "../../src/clock.ts";
import { type Config, loadConfig } from "../../src/config.ts";
import { dropDatabase, ensureDatabase } from "../../src/db/connect.ts";
import { migrate } from "../../src/db/migrate.ts";
import { buildDeps, closeDeps } from "../../src/deps.ts";
import { API_ERRORS, type ApiErrorCode } from "../../src/http/errors.ts";
import { ALL_SCOPES, type Scope } from "../../src/http/request-state.ts";
import { randomBase62 } from "../../src/ids.ts";
import { createLogger } from "../../src/logger.ts";
import { deliverBatch, type SendDeps, SendNotYetPossible } from "../../src/outbound/send.ts";
import { type QueueName, queuePrefix } from "../../src/queues/index.ts";
import { deleteInstanceKeys } from "../../src/queues/instance-keys.ts";
import { createRedis, type RedisTarget } from "../../src/redis/connect.ts";
import { insertTenant } from "../../src/tenants/repository.ts";
import { testLookup } from "./dns.ts";

const PG_BASE = process.env.TEST_DATABASE_BASE ?? "postgres://postgres@127.0.0.1:5432";
const REDIS_URL = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379/0";
/** Set (scripts/redis-cluster.ts): every test, and every process it starts, uses this Redis Cluster. */
const REDIS_CLUSTER_NODES = process.env.REDIS_CLUSTER_NODES ?? "";
const REDIS_TARGET: RedisTarget = {
  redisUrl: REDIS_URL,
  redisClusterNodes: loadConfig({ NODE_ENV: "development", REDIS_CLUSTER_NODES }).redisClusterNodes,
};

/** A database and a Redis prefix of their own for one test file, dropped at the end. */
export interface TestEnv {
  config: Config;
  clock: ManualClock;
  deps: AppDeps;
  app: App;
  /** With `simulator: true`: the simulator's base URL (its Graph API and `/_sim` control API). */
  simulatorUrl: string;
  /** With `simulator: true`: the api's own base URL (it listens so the simulator can post webhooks). */
  apiUrl: string;
  close(): Promise<void>;
}

export interface TestEnvOptions {
  env?: Record<string, string>;
  limits?: Partial<AppDeps["limits"]>;
  /** Start a provider simulator on an ephemeral port, and make the app listen for its webhooks. */
  simulator?: boolean;
  /** Simulator delay before each status webhook. */
  statusDelayMs?: number;
}

export async function createTestEnv(options: TestEnvOptions = {}): Promise<TestEnv> {
  const suffix = randomBase62(10).toLowerCase();
  const simulator = options.simulator ? await startTestSimulator(options.statusDelayMs ?? 10) : undefined;
  const config = loadConfig({
    // The public development defaults (secrets, open /ops); a test wanting otherwise overrides it.
    NODE_ENV: "development",
    DATABASE_URL: `${PG_BASE}/test_${suffix}`,
    REDIS_URL,
    REDIS_CLUSTER_NODES,
    REDIS_PREFIX: `test-${suffix}`,
    PUBLIC_BASE_URL: "http://localhost/v2",
    LOG_LEVEL: "silent",
    // Tests change senders and templates between requests and expect to see it at once.
    DIRECTORY_CACHE_MS: "0",
    // Send retries back off from this base; tests should not wait seconds for a retry.
    SEND_RETRY_BASE_MS: "100",
    ...(simulator && { WHATSAPP_GRAPH_URL: simulator.url }),
    ...options.env,
  });
  // A copy of the migrated template `bun run test` prepares on PG_BASE (scripts/test-template.ts),
  // when it did; a test on a server of its own (a replica's primary) migrates its database itself.
  const template = config.databaseUrl.startsWith(`${PG_BASE}/`)
    ? process.env.TEST_TEMPLATE_DATABASE
    : undefined;
  await ensureDatabase(config.databaseUrl, { template: template || undefined });
  const clock = new ManualClock();
  // Every request of a test comes from one address: the per-IP limits of the token endpoint, panel
  // and ops would otherwise pace whole files. Tests of those limits set their own.
  const limits = { tokenPerIp: 1000, panelPerIp: 1000, opsPerIp: 1000, ...options.limits };
  const deps = buildDeps(config, { clock, logger: createLogger("silent"), limits });
  deps.lookup = testLookup;
  await migrate(deps.db);
  const app = createApp(deps);
  let apiUrl = "";
  if (simulator) {
    app.listen({ port: 0, hostname: "127.0.0.1" });
    apiUrl = `http://127.0.0.1:${app.server?.port}`;
    simulator.setWebhookUrl(`${apiUrl}/webhooks/whatsapp`);
  }
  return {
    config,
    clock,
    deps,
    app,
    simulatorUrl: simulator?.url ?? "",
    apiUrl,
    async close() {
      await simulator?.close();
      if (apiUrl) await app.stop(true);
      await deleteRedisPrefix(config.redisPrefix);
      await closeDeps(deps);
      await dropDatabase(config.databaseUrl);
    },
  };
}

export interface TestSimulator {
  url: string;
  setWebhookUrl(url: string): void;
  close(): Promise<void>;
}

/** The real simulator, over HTTP on an ephemeral port, posting signed webhooks where it is told. */
export async function startTestSimulator(statusDelayMs = 10): Promise<TestSimulator> {
  const { createSimulator } = await import("../../src/simulator/app.ts");
  let webhookUrl = "http://127.0.0.1:9/unset";
  const simulator = createSimulator({
    webhookUrl: () => webhookUrl,
    appSecret: "dev-app-secret",
    statusDelayMs,
  });
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: simulator.app.fetch });
  return {
    url: `http://127.0.0.1:${server.port}`,
    setWebhookUrl(url) {
      webhookUrl = url;
    },
    async close() {
      simulator.stop();
      await server.stop(true);
    },
  };
}

/** Polls until `check` returns a value (not undefined/false), or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false>,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await Bun.sleep(25);
  }
}

/**
 * A stand-in worker of one of the env's queues runs `work` (a throw fails the job) until job `jobId`
 * is `state`, then closes: a job as a worker process leaves it, without one.
 */
export async function workJob(
  env: TestEnv,
  queue: QueueName,
  jobId: string,
  state: "completed" | "failed",
  work: () => Promise<void> = async () => {},
): Promise<void> {
  const connection = createRedis(env.config, { forQueues: true });
  const worker = new Worker(queue, work, { connection, prefix: queuePrefix(env.config.redisPrefix, queue) });
  try {
    await eventually(async () => (await env.deps.queues[queue].getJobState(jobId)) === state);
  } finally {
    await worker.close();
    connection.disconnect();
  }
}

export function deleteRedisPrefix(prefix: string): Promise<void> {
  return deleteInstanceKeys(REDIS_TARGET, prefix);
}

export interface CallOptions {
  body?: unknown;
  rawBody?: BodyInit;
  headers?: Record<string, string>;
  token?: string;
}

export interface CallResult {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: tests assert on arbitrary JSON shapes
  body: any;
  text: string;
}

/** `call`'s options for POST /webhooks/whatsapp: the body as the provider sends it, signed. */
export function signedWebhook(body: unknown, appSecret: string): CallOptions {
  return signedRawWebhook(JSON.stringify(body), appSecret);
}

/** The same for a JSON text written by hand (e.g. with escapes JSON.stringify would not write). */
export function signedRawWebhook(raw: string, appSecret: string): CallOptions {
  return {
    rawBody: raw,
    headers: { "content-type": "application/json", [SIGNATURE_HEADER]: signPayload(raw, appSecret) },
  };
}

/**
 * POST /webhooks/whatsapp through `app` as the provider sends it, signed with the app secret: `body`
 * is the webhook (built with src/channel/webhook-payloads.ts), or its JSON text written by hand.
 */
export function postWebhook(env: TestEnv, body: unknown, app: App = env.app): Promise<CallResult> {
  const secret = env.config.whatsappAppSecret;
  const options = typeof body === "string" ? signedRawWebhook(body, secret) : signedWebhook(body, secret);
  return call(app, "POST", "/webhooks/whatsapp", options);
}

/** One HTTP request through the real app (routing, hooks, validation), as a client sees it. */
export async function call(
  app: App,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<CallResult> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: BodyInit | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers["content-type"] ??= "application/json";
  }
  const response = await app.handle(new Request(`http://localhost${path}`, { method, headers, body }));
  const text = await response.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

export async function createTenantWithApp(
  deps: AppDeps,
  options: {
    scopes?: Scope[];
    readLimit?: number;
    sendLimit?: number;
    name?: string;
    dailyQuota?: number;
  } = {},
) {
  const tenant = await insertTenant(deps.db, {
    name: options.name ?? "Acme",
    dailyQuota: options.dailyQuota,
  });
  const { application, clientSecret } = await createApplication(deps.db, {
    tenantId: tenant.id,
    name: "Test app",
    scopes: options.scopes,
    readLimit: options.readLimit ?? 1000,
    sendLimit: options.sendLimit ?? 1000,
  });
  return { tenant, application, clientId: application.clientId, clientSecret };
}

/** POST /v2/oauth/token with the client-credentials grant (JSON), as a client asks for a token. */
export function requestToken(
  app: App,
  clientId: string,
  clientSecret: string,
  scope?: string,
): Promise<CallResult> {
  return call(app, "POST", "/v2/oauth/token", {
    body: { grant_type: "client_credentials", client_id: clientId, client_secret: clientSecret, scope },
  });
}

/** An access token of the application (the one way tests get one; the SDK's own is its own test). */
export async function getToken(
  app: App,
  clientId: string,
  clientSecret: string,
  scope?: string,
): Promise<string> {
  const result = await requestToken(app, clientId, clientSecret, scope);
  if (result.status !== 200) throw new Error(`token request failed: ${result.status} ${result.text}`);
  return result.body.access_token;
}

const REQUEST_ID = /^req_[0-9A-Za-z]{22}$/;

/**
 * SPEC §7's error envelope, whole: the status, the `type` the error catalogue (src/http/errors.ts,
 * which /docs and the OpenAPI document read too) gives the code, the parameter, the request id of
 * the `Request-Id` header and the code's documentation link; `messaging_state` only on
 * messaging_window_closed.
 */
export function expectApiError(result: CallResult, status: number, code: ApiErrorCode, param: string | null) {
  const requestId = result.headers.get("request-id");
  expect(requestId).toMatch(REQUEST_ID);
  expect({ status: result.status, body: result.body }).toEqual({
    status,
    body: {
      error: {
        type: API_ERRORS[code].type,
        code,
        message: expect.any(String),
        param,
        request_id: requestId,
        doc_url: `http://localhost/v2/docs#${code}`,
        ...(code === "messaging_window_closed" && { messaging_state: expect.any(Object) }),
      },
    },
  });
}

/**
 * Each request needs `scope`: without a token it is 401 unauthorized, with the token of an
 * application that has only the other scope 403 insufficient_scope.
 */
export async function expectScopeRequired(
  env: TestEnv,
  scope: Scope,
  requests: [method: string, path: string][],
) {
  const creds = await createTenantWithApp(env.deps, { scopes: ALL_SCOPES.filter((s) => s !== scope) });
  const token = await getToken(env.app, creds.clientId, creds.clientSecret);
  for (const [method, path] of requests) {
    expectApiError(await call(env.app, method, path), 401, "unauthorized", null);
    expectApiError(await call(env.app, method, path, { token }), 403, "insufficient_scope", null);
  }
}

/** A dependency out of reach: 503 service_unavailable with a Retry-After. */
export function expectUnavailable(result: CallResult) {
  expectApiError(result, 503, "service_unavailable", null);
  expect(Number(result.headers.get("retry-after"))).toBeGreaterThan(0);
}

/** A TCP port nothing listens on now (for a process the test starts). */
export async function freePort(): Promise<number> {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = probe.port ?? 0;
  await probe.stop(true);
  return port;
}

/** Waits for the next one-second rate-limit window, so a test starts with a full allowance. */
export async function nextSecond(): Promise<void> {
  await Bun.sleep(1000 - (Date.now() % 1000) + 20);
}

/**
 * Another app over the env's dependencies with these rate limits instead (e.g. a small allowance to
 * run out of), from the start of the next one-second window, with its full allowance.
 */
export async function appWithLimits(env: TestEnv, limits: Partial<AppDeps["limits"]>): Promise<App> {
  const app = createApp({ ...env.deps, limits: { ...env.deps.limits, ...limits } });
  await nextSecond();
  return app;
}

export interface WorkerProcess {
  name: string;
  proc: ReturnType<typeof Bun.spawn>;
  /** SIGTERM (graceful) by default; SIGKILL simulates a crash. */
  stop(signal?: "SIGTERM" | "SIGKILL"): Promise<number>;
}

/** Runs a real worker entrypoint (workers/<name>.ts) as its own process against the test env. */
export function spawnWorker(
  env: TestEnv,
  name: string,
  extraEnv: Record<string, string> = {},
): WorkerProcess {
  const proc = Bun.spawn(["bun", `workers/${name}.ts`], {
    env: {
      ...process.env,
      NODE_ENV: "development",
      DATABASE_URL: env.config.databaseUrl,
      REDIS_URL: env.config.redisUrl,
      REDIS_CLUSTER_NODES,
      REDIS_PREFIX: env.config.redisPrefix,
      WHATSAPP_GRAPH_URL: env.config.whatsappGraphUrl,
      LOG_LEVEL: process.env.TEST_WORKER_LOG_LEVEL ?? "silent",
      // A killed worker's jobs come back within a second (BullMQ's stalled check). All workers of a
      // run share these: the check is paced by a key every worker of the queue respects.
      WORKER_LOCK_MS: "1000",
      WORKER_STALLED_INTERVAL_MS: "300",
      SEND_RETRY_BASE_MS: env.config.workers.sendRetryBaseMs.toString(),
      ...extraEnv,
    },
    stdout: "inherit",
    stderr: "inherit",
  });
  return {
    name,
    proc,
    async stop(signal = "SIGTERM") {
      proc.kill(signal);
      return proc.exited;
    },
  };
}

/**
 * One message through the batch send path, as if it were a job of its own: its outcome, or the
 * reason thrown when it is to be retried (a retryable provider error, or SendNotYetPossible for an
 * attempt still in doubt).
 */
export async function deliverOne(
  deps: SendDeps,
  messageId: string,
): Promise<"sent" | "failed" | "adopted" | "skipped"> {
  const report = await deliverBatch(deps, [messageId]);
  const outcome = report.outcomes.get(messageId) ?? "skipped";
  if (outcome === "retry") {
    throw report.reasons.get(messageId) ?? new SendNotYetPossible("the message is not due yet");
  }
  return outcome === "held" ? "skipped" : outcome;
}

/**
 * For tools that read files: the document GET /v2/openapi.json serves, written to a new temp folder
 * in beforeAll (with a test env of its own) and removed in afterAll. Call at a test file's top level.
 */
export function servedOpenApiDocument(): () => { dir: string; file: string } {
  let env: TestEnv | undefined;
  let written: { dir: string; file: string } | undefined;
  beforeAll(async () => {
    env = await createTestEnv();
    const served = await call(env.app, "GET", "/v2/openapi.json");
    if (served.status !== 200) throw new Error(`GET /v2/openapi.json: ${served.status}`);
    const dir = await mkdtemp(join(tmpdir(), "openapi-"));
    written = { dir, file: join(dir, "openapi.json") };
    await Bun.write(written.file, served.text);
  });
  afterAll(async () => {
    await env?.close();
    if (written) await rm(written.dir, { recursive: true, force: true });
  });
  return () => {
    if (!written) throw new Error("the OpenAPI document is written in beforeAll");
    return written;
  };
}
