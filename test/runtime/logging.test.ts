import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { createLogger } from "../../src/logger.ts";
import { insertSender } from "../../src/senders/repository.ts";
import { syncSenderTemplates } from "../../src/senders/template-sync.ts";
import { postMessage } from "../support/fixtures.ts";
import { createTenantWithApp, createTestEnv, eventually, getToken, type TestEnv } from "../support/index.ts";

/**
 * Structured JSON logs: the access log's fields, the worker's per-job line, and what must never be
 * written (client secrets, access tokens, message content).
 */

const SENDER_ACCESS_TOKEN = "EAAG-sender-access-token-never-logged";
const SECRET_NAME = "Zebulon-Quixotic-Name";
const SECRET_ORDER = "ORDER-7Y3-CONFIDENTIAL";
const FREE_TEXT = "my very private free text message";

let env: TestEnv;
const apiLines: string[] = [];
let creds: Awaited<ReturnType<typeof createTenantWithApp>>;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  env = await createTestEnv({ simulator: true });
  creds = await createTenantWithApp(env.deps);
  const sender = await insertSender(env.deps.db, env.config.providerTokenKey, {
    tenantId: creds.tenant.id,
    phoneNumber: "+15550100031",
    providerPhoneNumberId: "331000000000001",
    wabaId: "431000000000001",
    accessToken: SENDER_ACCESS_TOKEN,
  });
  await syncSenderTemplates(env.deps, sender);
  // The same app, logging at info into memory.
  const logger = createLogger("info", "api", { write: (line: string) => void apiLines.push(line) });
  app = createApp({ ...env.deps, logger });
});
afterAll(() => env.close());

function parsed(lines: string[]): Record<string, unknown>[] {
  return lines.flatMap((chunk) => chunk.split("\n").filter((l) => l.trim() !== "")).map((l) => JSON.parse(l));
}

describe("access log", () => {
  let token: string;

  beforeAll(async () => {
    token = await getToken(app, creds.clientId, creds.clientSecret);
    const sent = await postMessage(app, token, {
      to: "+4915190003101",
      template: { name: "order_shipped", language: "en", variables: { body: [SECRET_NAME, SECRET_ORDER] } },
    });
    expect(sent.status).toBe(201);
    // Refused free text: its body must not surface in any log either.
    const refused = await postMessage(app, token, { to: "+4915190003101", body: FREE_TEXT });
    expect(refused.status).toBe(409);
    // The access log is written after the answer has gone out.
    await eventually(async () => parsed(apiLines).filter((l) => l.msg === "request").length === 3);
  });

  test("one JSON line per request with request id, tenant, application, route, method, path, status, duration", () => {
    const requests = parsed(apiLines).filter((l) => l.msg === "request");
    const tokenLine = requests.find((l) => l.route === "/v2/oauth/token");
    expect(tokenLine).toMatchObject({
      level: 30,
      name: "api",
      method: "POST",
      route: "/v2/oauth/token",
      path: "/v2/oauth/token",
      status: 200,
      // No token exists yet: the tenant is known only from one; the application is the client_id.
      tenant: null,
      application: creds.clientId,
    });
    expect(tokenLine?.request_id).toMatch(/^req_/);
    expect(typeof tokenLine?.duration_ms).toBe("number");
    expect(typeof tokenLine?.time).toBe("string");

    const sends = requests.filter((l) => l.route === "/v2/messages");
    expect(sends.map((l) => l.status)).toEqual([201, 409]);
    for (const line of sends) {
      expect(line).toMatchObject({
        method: "POST",
        path: "/v2/messages",
        tenant: creds.tenant.id,
        application: creds.clientId,
      });
      expect(line.request_id).toMatch(/^req_/);
      expect(line.duration_ms as number).toBeGreaterThan(0);
    }
  });

  test("no client secret, access token or message content in any line", () => {
    const all = apiLines.join("");
    expect(all.length).toBeGreaterThan(0);
    for (const secret of [creds.clientSecret, token, SECRET_NAME, SECRET_ORDER, FREE_TEXT]) {
      expect(all).not.toContain(secret);
    }
    expect(all).not.toContain(SENDER_ACCESS_TOKEN);
  });

  test("redaction is the backstop for fields that slip through", () => {
    const lines: string[] = [];
    const logger = createLogger("info", "test", { write: (line: string) => void lines.push(line) });
    logger.info(
      {
        client_secret: "s1",
        password: "s2",
        headers: { authorization: "Bearer s3", cookie: "panel_session=s4" },
        request: { body: "s5", access_token: "s6" },
        message: { text: "s7" },
        route: "/v2/messages",
        path: "/v2/messages",
      },
      "slip",
    );
    const line = lines.join("");
    for (const secret of ["s1", "s2", "s3", "s4", "s5", "s6", "s7"])
      expect(line).not.toContain(`"${secret}"`);
    expect(JSON.parse(line)).toMatchObject({ route: "/v2/messages", path: "/v2/messages", msg: "slip" });
  });
});

describe("worker log", () => {
  test("one line per job with queue, job name and id, attempt, duration and outcome; no content", async () => {
    const token = await getToken(app, creds.clientId, creds.clientSecret);
    const sent = await postMessage(app, token, {
      to: "+4915190003102",
      template: { name: "order_shipped", language: "en", variables: { body: [SECRET_NAME, SECRET_ORDER] } },
    });
    expect(sent.status).toBe(201);

    // As test/support/index.ts spawnWorker, with the worker's stdout captured.
    const proc = Bun.spawn(["bun", "workers/send.ts"], {
      env: {
        ...process.env,
        NODE_ENV: "development",
        DATABASE_URL: env.config.databaseUrl,
        REDIS_URL: env.config.redisUrl,
        REDIS_PREFIX: env.config.redisPrefix,
        WHATSAPP_GRAPH_URL: env.config.whatsappGraphUrl,
        LOG_LEVEL: "info",
      },
      stdout: "pipe",
      stderr: "inherit",
    });
    try {
      await eventually(async () => {
        const row = await env.deps.db
          .selectFrom("messages")
          .select("status")
          .where("id", "=", sent.body.id)
          .executeTakeFirst();
        return row?.status !== "accepted";
      }, 20_000);
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
    }
    const output = await new Response(proc.stdout).text();
    const lines = parsed([output]);
    // A send job carries a committed batch of messages (here one); its id is the batch's.
    const job = lines.find((l) => l.msg === "job" && l.queue === "send");
    expect(job).toMatchObject({
      name: "send",
      queue: "send",
      job_name: "send",
      attempt: 1,
      outcome: "completed",
    });
    expect(typeof job?.job_id).toBe("string");
    expect(typeof job?.duration_ms).toBe("number");
    for (const secret of [SECRET_NAME, SECRET_ORDER, SENDER_ACCESS_TOKEN, creds.clientSecret, token]) {
      expect(output).not.toContain(secret);
    }
  }, 30_000);
});
