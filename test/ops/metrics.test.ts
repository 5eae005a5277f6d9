import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app.ts";
import { SIGNATURE_HEADER } from "../../src/channel/signature.ts";
import type { SenderRow } from "../../src/senders/repository.ts";
import { addSender, customerWrites, postMessage } from "../support/fixtures.ts";
import {
  call,
  createTenantWithApp,
  createTestEnv,
  eventually,
  getToken,
  requestToken,
  spawnWorker,
  type TestEnv,
} from "../support/index.ts";

/**
 * GET /metrics after real traffic: the api's own series and those a spawned send worker published
 * through Redis, in valid Prometheus text format (parsed strictly below).
 */

const OPS = { OPS_USER: "prometheus", OPS_PASSWORD: "scrape-me-please" };
const OPS_AUTH = { authorization: `Basic ${btoa(`${OPS.OPS_USER}:${OPS.OPS_PASSWORD}`)}` };
const PHONE_NUMBER_ID = "309000000000001";
const SENDS = 3;

let env: TestEnv;
let sender: SenderRow;
let token: string;
let created = 0;
let exposition: Exposition;

// ---- A strict parser of the Prometheus text format (0.0.4) ----

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
interface Family {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}
type Exposition = Map<string, Family>;

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const SAMPLE_LINE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: (-?\\d+))?$`);
const LABEL_PAIR = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/;
const SUFFIXES: Record<string, string[]> = {
  counter: [""],
  gauge: [""],
  untyped: [""],
  histogram: ["_bucket", "_sum", "_count"],
  summary: ["", "_sum", "_count"],
};

function parseValue(raw: string, line: string): number {
  if (raw === "NaN") return Number.NaN;
  if (raw === "+Inf") return Number.POSITIVE_INFINITY;
  if (raw === "-Inf") return Number.NEGATIVE_INFINITY;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(raw)) throw new Error(`bad value in: ${line}`);
  return Number(raw);
}

function parseLabels(raw: string | undefined, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let rest = raw ?? "";
  while (rest.length > 0) {
    const match = LABEL_PAIR.exec(rest);
    if (!match) throw new Error(`bad labels in: ${line}`);
    const [all, key, value] = match as unknown as [string, string, string];
    if (key in labels) throw new Error(`duplicate label ${key} in: ${line}`);
    labels[key] = value.replace(/\\(["\\n])/g, (_, c: string) => (c === "n" ? "\n" : c));
    rest = rest.slice(all.length);
  }
  return labels;
}

function parseExposition(text: string): Exposition {
  const families: Exposition = new Map();
  const seen = new Set<string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const help = new RegExp(`^# HELP (${NAME}) (.*)$`).exec(line);
    const type = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`).exec(line);
    if (help) {
      const family = families.get(help[1]!) ?? { name: help[1]!, type: "", help: "", samples: [] };
      family.help = help[2]!;
      families.set(family.name, family);
      continue;
    }
    if (type) {
      const family = families.get(type[1]!) ?? { name: type[1]!, type: "", help: "", samples: [] };
      if (family.samples.length > 0) throw new Error(`TYPE after samples: ${line}`);
      family.type = type[2]!;
      families.set(family.name, family);
      continue;
    }
    if (line.startsWith("#")) continue;
    const sample = SAMPLE_LINE.exec(line);
    if (!sample) throw new Error(`not a sample line: ${line}`);
    const name = sample[1]!;
    // The family is the name, or the name less a suffix its type allows.
    const family = [...families.values()].find((f) =>
      (SUFFIXES[f.type] ?? [""]).some((suffix) => `${f.name}${suffix}` === name),
    );
    if (!family) throw new Error(`sample without a TYPE: ${line}`);
    const labels = parseLabels(sample[2], line);
    const identity = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(identity)) throw new Error(`duplicate series: ${line}`);
    seen.add(identity);
    family.samples.push({ name, labels, value: parseValue(sample[3]!, line) });
  }
  return families;
}

function family(name: string): Family {
  const found = exposition.get(name);
  if (!found) throw new Error(`no metric family ${name}`);
  return found;
}

/** Sum of the samples named `name` (default: the family) whose labels include `where`. */
function total(familyName: string, where: Record<string, string> = {}, sampleName = familyName): number {
  return family(familyName)
    .samples.filter(
      (s) => s.name === sampleName && Object.entries(where).every(([k, v]) => s.labels[k] === v),
    )
    .reduce((sum, s) => sum + s.value, 0);
}

// ---- Traffic ----

beforeAll(async () => {
  env = await createTestEnv({ simulator: true, env: OPS, limits: { token: 3 } });
  const creds = await createTenantWithApp(env.deps);
  // Its template sync is a provider call from the api process.
  sender = await addSender(env, creds.tenant.id, { phoneNumberId: PHONE_NUMBER_ID, templates: true });
  token = await getToken(env.app, creds.clientId, creds.clientSecret);

  // A 429 from the token endpoint (3 per second per client).
  let limited = 0;
  for (let i = 0; i < 10 && limited === 0; i++) {
    const result = await requestToken(env.app, creds.clientId, creds.clientSecret);
    if (result.status === 429) limited++;
  }
  expect(limited).toBe(1);
  // And one from the per-IP limit of callers without a token.
  const strict = createApp({ ...env.deps, limits: { ...env.deps.limits, anonymous: 1, token: 3 } });
  for (let i = 0; i < 10 && limited === 1; i++) {
    if ((await call(strict, "GET", "/v2/senders")).status === 429) limited++;
  }
  expect(limited).toBe(2);

  const messageIds: string[] = [];
  for (let i = 0; i < SENDS; i++) {
    const result = await postMessage(
      env.app,
      token,
      {
        to: `+4915190000${i}`,
        template: { name: "order_shipped", language: "en", variables: { body: ["Ana", `A-${i}`] } },
      },
      { key: `metrics-${i}` },
    );
    expect(result.status).toBe(201);
    created++;
    messageIds.push(result.body.id);
  }
  // A replay creates nothing.
  const replay = await postMessage(
    env.app,
    token,
    {
      to: "+49151900000",
      template: { name: "order_shipped", language: "en", variables: { body: ["Ana", "A-0"] } },
    },
    { key: "metrics-0" },
  );
  expect(replay.status).toBe(200);

  // 429s from an application's read and send limits, and from a tenant's daily quota.
  const tight = await createTenantWithApp(env.deps, { name: "Tight", readLimit: 1, sendLimit: 1 });
  const tightToken = await getToken(env.app, tight.clientId, tight.clientSecret);
  const refusedUntil429 = async (make: () => Promise<{ status: number }>) => {
    for (let i = 0; i < 10; i++) if ((await make()).status === 429) return;
    throw new Error("no 429");
  };
  await refusedUntil429(() => call(env.app, "GET", "/v2/contacts", { token: tightToken }));
  await refusedUntil429(() => postMessage(env.app, tightToken, {}));
  const spent = await createTenantWithApp(env.deps, { name: "Spent" });
  const spentToken = await getToken(env.app, spent.clientId, spent.clientSecret);
  const noQuota = createApp({ ...env.deps, config: { ...env.config, dailySendQuota: 0 } });
  const refused = await postMessage(noQuota, spentToken, {});
  expect({ status: refused.status, code: refused.body.error.code }).toEqual({
    status: 429,
    code: "quota_exceeded",
  });

  expect((await call(env.app, "GET", "/v2/senders", { token })).status).toBe(200);
  expect((await call(env.app, "GET", `/v2/senders/${sender.id}/templates`, { token })).status).toBe(200);
  expect((await call(env.app, "GET", "/v2/no-such-thing", { token })).status).toBe(404);

  const forged = await call(env.app, "POST", "/webhooks/whatsapp", {
    body: { object: "whatsapp_business_account", entry: [] },
    headers: { [SIGNATURE_HEADER]: `sha256=${"0".repeat(64)}` },
  });
  expect(forged.status).toBe(401);

  // A customer writes: the simulator posts a signed inbound webhook to the listening api.
  await customerWrites(env, PHONE_NUMBER_ID, { from: "4915190000077", type: "text", text: "hi" });

  // A real send worker delivers the messages; its SIGTERM publishes its last snapshot.
  const worker = spawnWorker(env, "send");
  try {
    await eventually(async () => {
      const rows = await env.deps.db
        .selectFrom("messages")
        .select("status")
        .where("id", "in", messageIds)
        .execute();
      return rows.length === SENDS && rows.every((r) => r.status !== "accepted");
    }, 20_000);
    // The simulator posts each send's statuses back (sent, delivered, read).
    await eventually(async () =>
      (await env.deps.metrics.webhookEvents.get()).values.some((v) => v.labels.kind === "status"),
    );
  } finally {
    expect(await worker.stop("SIGTERM")).toBe(0);
  }

  const scrape = await call(env.app, "GET", "/metrics", { headers: OPS_AUTH });
  expect(scrape.status).toBe(200);
  expect(scrape.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  exposition = parseExposition(scrape.text);
  if (process.env.PRINT_METRICS) console.log(scrape.text);
}, 60_000);
afterAll(() => env.close());

describe("GET /metrics", () => {
  test("every family has HELP and TYPE, and every series names its process", () => {
    expect(exposition.size).toBeGreaterThan(20);
    for (const f of exposition.values()) {
      expect({ name: f.name, typed: f.type !== "", helped: f.help !== "" }).toEqual({
        name: f.name,
        typed: true,
        helped: true,
      });
      for (const sample of f.samples) {
        expect(sample.labels.process).toMatch(/^(api|send)$/);
        expect(sample.labels.process_id).toMatch(/^.+:\d+$/);
      }
    }
  });

  test("HTTP requests by method, route template and status, with a latency histogram", () => {
    expect(family("http_requests_total").type).toBe("counter");
    expect(total("http_requests_total", { method: "POST", route: "/v2/messages", status: "201" })).toBe(
      created,
    );
    expect(total("http_requests_total", { method: "POST", route: "/v2/messages", status: "200" })).toBe(1);
    expect(
      total("http_requests_total", {
        method: "GET",
        route: "/v2/senders/:sender_id/templates",
        status: "200",
      }),
    ).toBe(1);
    expect(total("http_requests_total", { route: "unmatched", status: "404" })).toBe(1);
    expect(total("http_requests_total", { route: "/v2/oauth/token", status: "429" })).toBe(1);
    expect(total("http_requests_total", { route: "/webhooks/whatsapp", status: "401" })).toBe(1);
    // Refused before routing (the per-IP limit), still labelled with the route it was meant for.
    expect(total("http_requests_total", { method: "GET", route: "/v2/senders", status: "429" })).toBe(1);
    // Templates, never raw paths: no id makes a series of its own.
    const routes = family("http_requests_total").samples.map((s) => s.labels.route ?? "");
    expect(routes.filter((r) => /(snd|msg|ctc|req)_[A-Za-z0-9]/.test(r))).toEqual([]);

    const histogram = family("http_request_duration_seconds");
    expect(histogram.type).toBe("histogram");
    const where = { method: "POST", route: "/v2/messages", status: "201" };
    expect(total("http_request_duration_seconds", where, "http_request_duration_seconds_count")).toBe(
      created,
    );
    expect(
      total("http_request_duration_seconds", where, "http_request_duration_seconds_sum"),
    ).toBeGreaterThan(0);
    const infBucket = histogram.samples.find(
      (s) =>
        s.name === "http_request_duration_seconds_bucket" &&
        s.labels.le === "+Inf" &&
        s.labels.status === "201",
    );
    expect(infBucket?.value).toBe(created);
  });

  test("429s by limit kind", () => {
    expect(family("http_rate_limited_total").type).toBe("counter");
    expect(total("http_rate_limited_total", { kind: "token" })).toBe(1);
    expect(total("http_rate_limited_total", { kind: "anonymous" })).toBe(1);
    expect(total("http_rate_limited_total", { kind: "read" })).toBe(1);
    expect(total("http_rate_limited_total", { kind: "send" })).toBe(1);
    expect(total("http_rate_limited_total", { kind: "quota" })).toBe(1);
  });

  test("accepted sends: at least every 201, replays not counted", () => {
    expect(total("messages_accepted_total")).toBe(created);
    expect(total("messages_accepted_total", { type: "template" })).toBe(created);
  });

  test("provider calls by operation and outcome, with latency, from the api and from the send worker", () => {
    expect(
      total("provider_requests_total", { process: "api", operation: "list_templates", outcome: "ok" }),
    ).toBe(1);
    expect(
      total("provider_requests_total", { process: "send", operation: "send_message", outcome: "ok" }),
    ).toBeGreaterThanOrEqual(SENDS);
    expect(family("provider_request_duration_seconds").type).toBe("histogram");
    expect(
      total(
        "provider_request_duration_seconds",
        { process: "send", operation: "send_message" },
        "provider_request_duration_seconds_count",
      ),
    ).toBeGreaterThanOrEqual(SENDS);
    expect(total("messages_delivery_outcomes_total", { process: "send", outcome: "sent" })).toBe(SENDS);
  });

  test("queue depths per queue and state (read at scrape), job durations per queue and outcome (worker)", () => {
    expect(family("queue_jobs").type).toBe("gauge");
    for (const queue of ["send", "finalize", "status"]) {
      for (const state of ["waiting", "active", "delayed", "failed", "completed"]) {
        const series = family("queue_jobs").samples.filter(
          (s) => s.labels.queue === queue && s.labels.state === state,
        );
        expect({ queue, state, series: series.length }).toEqual({ queue, state, series: 1 });
        expect(series[0]!.value).toBeGreaterThanOrEqual(0);
      }
    }
    expect(family("queue_job_duration_seconds").type).toBe("histogram");
    expect(
      total(
        "queue_job_duration_seconds",
        { process: "send", queue: "send", outcome: "completed" },
        "queue_job_duration_seconds_count",
      ),
    ).toBeGreaterThanOrEqual(SENDS);
  });

  test("feed: pending count and oldest age (read at scrape), sequencer tick time and batch size (worker)", () => {
    expect(family("feed_pending_messages").samples).toEqual([
      expect.objectContaining({ labels: expect.objectContaining({ process: "api" }) }),
    ]);
    expect(total("feed_pending_messages")).toBeGreaterThanOrEqual(0);
    expect(total("feed_oldest_pending_age_seconds")).toBeGreaterThanOrEqual(0);
    expect(family("feed_sequencer_tick_duration_seconds").type).toBe("histogram");
    expect(
      total(
        "feed_sequencer_tick_duration_seconds",
        { process: "send" },
        "feed_sequencer_tick_duration_seconds_count",
      ),
    ).toBeGreaterThan(0);
    // The worker's sequencer numbered the accepted sends (the api runs none).
    expect(
      total("feed_sequencer_batch_size", { process: "send" }, "feed_sequencer_batch_size_sum"),
    ).toBeGreaterThanOrEqual(SENDS);
  });

  test("webhook events received by kind, rejected by reason", () => {
    expect(total("webhook_rejected_total", { reason: "bad_signature" })).toBe(1);
    expect(total("webhook_events_received_total", { kind: "message" })).toBe(1);
    expect(total("webhook_events_received_total", { kind: "status" })).toBeGreaterThanOrEqual(1);
  });

  test("process metrics of the api and of the worker; the worker is counted while its snapshot lives", () => {
    for (const process of ["api", "send"]) {
      expect(total("process_cpu_seconds_total", { process })).toBeGreaterThan(0);
      expect(total("process_resident_memory_bytes", { process })).toBeGreaterThan(0);
    }
    expect(total("worker_processes", { worker: "send" })).toBe(1);
  });
});
