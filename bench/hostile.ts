/**
 * `bun bench/hostile.ts`: how long hostile bodies take to refuse, and what they do to everyone else,
 * on a real api process (issue 11). Run by hand; prints its figures.
 *
 * 1. POST /v2/oauth/token: a small bad body (`{`) vs 100 KB of nested brackets, sequentially.
 * 2. GET /healthz alone, then while four clients send 100 KB nested bodies to the token endpoint, then
 *    while four send 30 MB bodies to the token, panel, webhook and ops endpoints, each request from a new address
 *    (TRUST_PROXY=1 and a random X-Forwarded-For, as a botnet would: no per-IP limit helps).
 *
 * Uses the local PostgreSQL and Redis with a database `bench_hostile` and the Redis prefix
 * `bench-hostile`, dropped afterwards.
 */
import { type Subprocess, spawn } from "bun";
import { quantile } from "./lib/format.ts";
import { freePort, waitHttp } from "./lib/net.ts";
import { cpuSeconds } from "./lib/proc.ts";
import { freshStores, PG_BASE, REDIS_URL, removeStores } from "./lib/stores.ts";
import { exitOnHelp } from "./lib/usage.ts";

exitOnHelp(`bun bench/hostile.ts
  How long hostile bodies take to refuse and what they do to everyone else, on a real api process
  (local Postgres and Redis; database bench_hostile, Redis prefix bench-hostile). No options.`);

const DATABASE_URL = `${PG_BASE}/bench_hostile`;
const PREFIX = "bench-hostile";
const MB = 1024 * 1024;
const NESTED = `${"[".repeat(50_000)}${"]".repeat(50_000)}`;

function describe(label: string, samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  const ms = (v: number) => `${v.toFixed(2)} ms`;
  return `${label.padEnd(52)} n=${String(sorted.length).padStart(4)}  p50 ${ms(quantile(sorted, 0.5))}  p99 ${ms(quantile(sorted, 0.99))}  max ${ms(sorted.at(-1) ?? Number.NaN)}`;
}

const randomIp = () =>
  `10.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}.${Math.floor(Math.random() * 256)}`;

async function timed(request: () => Promise<Response>, expect: number[]): Promise<number> {
  const started = performance.now();
  const response = await request();
  await response.arrayBuffer();
  const elapsed = performance.now() - started;
  if (!expect.includes(response.status)) throw new Error(`unexpected status ${response.status}`);
  return elapsed;
}

async function main() {
  await freshStores(DATABASE_URL, PREFIX);
  const port = freePort();
  const base = `http://127.0.0.1:${port}`;
  let api: Subprocess | undefined;
  try {
    api = spawn(["bun", "src/server.ts"], {
      env: {
        ...process.env,
        NODE_ENV: "development",
        PORT: String(port),
        DATABASE_URL,
        REDIS_URL,
        REDIS_PREFIX: PREFIX,
        LOG_LEVEL: "error",
        TRUST_PROXY: "1",
      },
      stdout: "inherit",
      stderr: "inherit",
    });
    await waitHttp(`${base}/healthz`, "the api");

    const token = (body: string) => () =>
      fetch(`${base}/v2/oauth/token`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": randomIp() },
        body,
      });
    for (let i = 0; i < 20; i++) await timed(token(NESTED), [400]); // warm-up
    const small: number[] = [];
    const nested: number[] = [];
    for (let i = 0; i < 200; i++) {
      small.push(await timed(token("{"), [400]));
      nested.push(await timed(token(NESTED), [400]));
    }
    console.log(describe("token endpoint, small bad body `{` -> 400", small));
    console.log(describe("token endpoint, 100 KB nested brackets -> 400", nested));

    const health = async (n: number) => {
      const samples: number[] = [];
      for (let i = 0; i < n; i++) {
        samples.push(await timed(() => fetch(`${base}/healthz`), [200]));
        await Bun.sleep(5);
      }
      return samples;
    };
    console.log(describe("GET /healthz, quiet", await health(200)));

    // The hostile clients run in a process of their own, so that their work is not timed here.
    for (const kind of ["nested", "huge"] as const) {
      const flood = spawn(["bun", "bench/hostile.ts", "--flood", base, kind], {
        stdout: "pipe",
        stderr: "inherit",
      });
      await Bun.sleep(1000);
      const apiCpuBefore = cpuSeconds(api.pid);
      const started = performance.now();
      const loaded = await health(400);
      const apiCpu = (cpuSeconds(api.pid) - apiCpuBefore) / ((performance.now() - started) / 1000);
      flood.kill("SIGTERM");
      const statuses = (await new Response(flood.stdout).text()).trim();
      const what = kind === "nested" ? "100 KB nested JSON to the token endpoint" : "30 MB bodies";
      console.log(describe(`GET /healthz, 4 clients sending ${what}`, loaded));
      console.log(`  api CPU meanwhile ${(apiCpu * 100).toFixed(0)}% of one core; refused: ${statuses}`);
    }
  } finally {
    api?.kill("SIGTERM");
    await api?.exited;
    await removeStores(DATABASE_URL, PREFIX);
  }
}

/** The four hostile clients (a child process of the benchmark); prints statuses when stopped. */
async function flood(base: string, kind: "nested" | "huge") {
  let stop = false;
  const refused = new Map<number, number>();
  process.on("SIGTERM", () => {
    stop = true;
  });
  const targets =
    kind === "nested"
      ? ["/v2/oauth/token", "/v2/oauth/token", "/v2/oauth/token", "/v2/oauth/token"]
      : ["/v2/oauth/token", "/panel/sign-in", "/webhooks/whatsapp", "/ops/queues"];
  const big = new Uint8Array(30 * MB);
  await Promise.all(
    targets.map(async (path) => {
      while (!stop) {
        const huge = kind === "huge";
        const response = await fetch(`${base}${path}`, {
          method: "POST",
          headers: {
            "content-type": huge ? "application/x-www-form-urlencoded" : "application/json",
            "x-forwarded-for": randomIp(),
          },
          body: huge ? big : NESTED,
        }).catch(() => undefined);
        if (!response) continue;
        await response.arrayBuffer().catch(() => undefined);
        refused.set(response.status, (refused.get(response.status) ?? 0) + 1);
      }
    }),
  );
  console.log([...refused].map(([status, count]) => `${status} x ${count}`).join(", "));
}

const floodAt = process.argv.indexOf("--flood");
if (floodAt > 0)
  await flood(process.argv[floodAt + 1] ?? "", process.argv[floodAt + 2] === "huge" ? "huge" : "nested");
else await main();
