import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createTestEnv, eventually, freePort, type TestEnv } from "../support/index.ts";

/**
 * `API_PROCESSES=2 SEND_WORKERS=2 bun run start` (scripts/start.ts, as an operator runs it): two api
 * processes share one port and both take connections, which their prefixed log lines (`[api-1]`,
 * `[api-2]`) show; a scrape of /metrics, whichever process answers it, counts each process's requests
 * once and the deployment-wide gauges once.
 */

let env: TestEnv;
beforeAll(async () => {
  env = await createTestEnv();
});
afterAll(() => env.close());

const PROBES = 60;

/** `name{labels} value` lines of one metric, labels as an object (a plain parse: our label values have no commas or quotes). */
function samples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  return text
    .split("\n")
    .filter((line) => line.startsWith(`${name}{`))
    .map((line) => {
      const [, labels = "", value = ""] = /^[^{]+\{(.*)\} (\S+)$/.exec(line) ?? [];
      return {
        labels: Object.fromEntries(labels.split(",").map((pair) => pair.replace(/"/g, "").split("="))),
        value: Number(value),
      };
    });
}

describe("several api processes", () => {
  test("API_PROCESSES=2: both answer on one port; any one's /metrics counts every process once", async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const start = Bun.spawn(["bun", "scripts/start.ts"], {
      env: {
        ...process.env,
        NODE_ENV: "development",
        PORT: String(port),
        SIMULATOR_PORT: String(await freePort()),
        PUBLIC_BASE_URL: `${base}/v2`,
        DATABASE_URL: env.config.databaseUrl,
        REDIS_URL: env.config.redisUrl,
        REDIS_PREFIX: env.config.redisPrefix,
        LOG_LEVEL: "info",
        API_PROCESSES: "2",
        SEND_WORKERS: "2",
      },
      stdout: "pipe",
      stderr: "inherit",
    });
    const lines: string[] = [];
    void (async () => {
      let rest = "";
      for await (const chunk of start.stdout) {
        rest += new TextDecoder().decode(chunk);
        const parts = rest.split("\n");
        rest = parts.pop() ?? "";
        lines.push(...parts);
      }
    })();
    try {
      await eventually(async () => lines.some((line) => line.includes("[start] ready")), 90_000);

      // A new connection each time: the kernel spreads connections, not requests on one.
      for (let i = 0; i < PROBES; i++) {
        const response = await fetch(`${base}/api-processes-probe`, { headers: { connection: "close" } });
        expect(response.status).toBe(404);
        await response.body?.cancel();
      }
      const served = (name: string) =>
        lines.filter(
          (line) => line.includes(`[${name}] info request`) && line.includes("/api-processes-probe"),
        ).length;
      await eventually(async () => served("api-1") + served("api-2") === PROBES);
      expect(served("api-1")).toBeGreaterThan(0);
      expect(served("api-2")).toBeGreaterThan(0);

      // Past one publishing interval, every process's snapshot holds these requests.
      await Bun.sleep(5500);
      for (let scrape = 0; scrape < 4; scrape++) {
        const response = await fetch(`${base}/metrics`, { headers: { connection: "close" } });
        expect(response.status).toBe(200);
        const text = await response.text();
        const requests = samples(text, "http_requests_total").filter((s) => s.labels.process === "api");
        expect(new Set(requests.map((s) => s.labels.process_id)).size).toBe(2);
        const probes = requests.filter((s) => s.labels.route === "unmatched" && s.labels.status === "404");
        // Each process's count once: whichever answered, together exactly the probes sent.
        expect(probes.reduce((sum, s) => sum + s.value, 0)).toBe(PROBES);
        expect(probes.map((s) => s.value).every((value) => value > 0)).toBe(true);
        // Read at scrape time by the process that answers, never from another's snapshot.
        expect(samples(text, "queue_jobs")).toHaveLength(4 * 5);
        expect(samples(text, "feed_pending_messages")).toHaveLength(1);
        expect(samples(text, "worker_processes").find((s) => s.labels.worker === "send")?.value).toBe(2);
      }
    } finally {
      start.kill("SIGTERM");
      expect(await start.exited).toBe(0);
    }
  }, 150_000);
});
