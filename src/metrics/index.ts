import { hostname } from "node:os";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** How long a process's published snapshot counts as alive (publish.ts writes, src/ops/metrics-scrape.ts reads). */
export const METRICS_SNAPSHOT_TTL_SECONDS = 30;

/**
 * Every Prometheus metric of the service, defined once. Each process (the api, each worker) makes
 * its own registry with `createMetrics` and passes the handles down as a dependency; prom-client's
 * global default registry is never used, so tests can build as many as they like.
 *
 * Every series carries two labels that name the process it comes from: `process` (api, send,
 * finalize, status, maintenance) and `process_id` (hostname:pid). Workers publish their registry to
 * Redis (publish.ts) and the api's /metrics merges them with its own, so one scrape sees everything;
 * the process labels keep series of different processes apart (nothing is summed across processes).
 */

/** Where 429s come from (docs/operations.md): the `kind` label of `http_rate_limited_total`. */
export type RateLimitKind =
  | "read"
  | "send"
  | "token"
  | "anonymous"
  | "panel"
  | "ops"
  | "quota"
  | "auth_failures";

const LABEL_NAMES = {
  http: ["method", "route", "status"],
  provider: ["operation", "outcome"],
  job: ["queue", "outcome"],
  queue: ["queue", "state"],
} as const;

/**
 * Gauges the scraping api process reads at scrape time (src/ops/metrics-scrape.ts): the same for the
 * whole deployment, so they come from the process that answers, never from snapshots.
 */
export const SCRAPE_TIME_METRICS: ReadonlySet<string> = new Set([
  "queue_jobs",
  "worker_processes",
  "feed_pending_messages",
  "feed_oldest_pending_age_seconds",
  "webhook_endpoints",
  "webhook_endpoint_longest_failure_seconds",
]);

const SECONDS_FAST = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const SECONDS_SLOW = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export interface MetricsOptions {
  /** The process name: `api`, or the worker's (send, finalize, status, maintenance). */
  process: string;
}

export function createMetrics(options: MetricsOptions) {
  const registry = new Registry();
  const processId = `${hostname()}:${process.pid}`;
  registry.setDefaultLabels({ process: options.process, process_id: processId });
  // Process metrics: CPU, memory, event loop, GC.
  collectDefaultMetrics({ register: registry });
  // Bun runs JavaScriptCore, which has no V8 heap spaces: these three are read through Bun's
  // heapStats(), a walk of the heap that cost the api ~3% of its CPU (every metrics publish).
  // nodejs_heap_size_*_bytes and process_resident_memory_bytes remain.
  for (const name of [
    "nodejs_heap_space_size_total_bytes",
    "nodejs_heap_space_size_used_bytes",
    "nodejs_heap_space_size_available_bytes",
  ])
    registry.removeSingleMetric(name);
  const registers = [registry];
  // Values read at scrape time exist in the api only; the feed sequencer runs in workers only. A
  // metric a process never records stays out of its registry, so it exports no misleading zeros.
  const apiOnly = options.process === "api" ? registers : [];
  const workersOnly = options.process === "api" ? [] : registers;

  return {
    registry,
    process: options.process,
    processId,

    // HTTP (api): recorded once per request in the pipeline's onAfterResponse.
    httpRequests: new Counter({
      name: "http_requests_total",
      help: "HTTP requests answered, by method, matched route template ('unmatched' when no route) and status.",
      labelNames: LABEL_NAMES.http,
      registers,
    }),
    httpRequestDuration: new Histogram({
      name: "http_request_duration_seconds",
      help: "Time from receiving a request to having answered it, by method, route template and status.",
      labelNames: LABEL_NAMES.http,
      buckets: SECONDS_FAST,
      registers,
    }),
    rateLimited: new Counter({
      name: "http_rate_limited_total",
      help: "Requests refused with 429, by limit: read, send (per application), token, anonymous (per IP), panel and ops (per IP), quota (tenant's daily quota), auth_failures (repeated failed credentials from one IP).",
      labelNames: ["kind"] as const,
      registers,
    }),

    // Read routing (src/db/read-replica.ts), only with DATABASE_READ_URL.
    reads: new Counter({
      name: "db_reads_total",
      help: "Reads of contacts, history, conversations and the feed with DATABASE_READ_URL set, by the database that served them and why: replica; primary when the replica had not replayed the application's last write (replica_behind), had failed (replica_down), cancelled the query for a recovery conflict (replica_conflict) or Redis could not say (writes_unknown).",
      labelNames: ["database", "route"] as const,
      registers: apiOnly,
    }),

    // Sending.
    messagesAccepted: new Counter({
      name: "messages_accepted_total",
      help: "Outbound messages accepted (created; idempotent replays not counted), by type (text, template).",
      labelNames: ["type"] as const,
      registers,
    }),
    deliveries: new Counter({
      name: "messages_delivery_outcomes_total",
      help: "Send jobs by what they did with their message: sent, failed (for good), adopted (an in-doubt send confirmed by webhook), skipped (nothing to do).",
      labelNames: ["outcome"] as const,
      registers,
    }),
    providerRequests: new Counter({
      name: "provider_requests_total",
      help: "Calls to the channel provider (WhatsApp Graph), by operation and outcome (ok, or the normalized error code).",
      labelNames: LABEL_NAMES.provider,
      registers,
    }),
    providerRequestDuration: new Histogram({
      name: "provider_request_duration_seconds",
      help: "Latency of calls to the channel provider, by operation and outcome.",
      labelNames: LABEL_NAMES.provider,
      buckets: SECONDS_SLOW,
      registers,
    }),

    // Queues: depths are read from BullMQ at scrape time (api only); durations per processed job (workers).
    queueJobs: new Gauge({
      name: "queue_jobs",
      help: "Jobs in each BullMQ queue by state (waiting, active, delayed, failed, completed), read at scrape time.",
      labelNames: LABEL_NAMES.queue,
      registers: apiOnly,
    }),
    jobDuration: new Histogram({
      name: "queue_job_duration_seconds",
      help: "Processing time of one job attempt, by queue and outcome (completed, failed: thrown, retried by BullMQ until its attempts run out).",
      labelNames: LABEL_NAMES.job,
      buckets: SECONDS_SLOW,
      registers,
    }),
    workerProcesses: new Gauge({
      name: "worker_processes",
      help: `Worker processes whose metrics reached Redis in the last ${METRICS_SNAPSHOT_TTL_SECONDS} seconds, by process name (read at scrape time).`,
      labelNames: ["worker"] as const,
      registers: apiOnly,
    }),

    // The feed (DESIGN §6).
    feedPending: new Gauge({
      name: "feed_pending_messages",
      help: "Committed messages not yet given a feed position, read at scrape time.",
      registers: apiOnly,
    }),
    feedOldestPendingAge: new Gauge({
      name: "feed_oldest_pending_age_seconds",
      help: "How long the oldest message waiting for a feed position has waited (0 when none), read at scrape time.",
      registers: apiOnly,
    }),
    feedTickDuration: new Histogram({
      name: "feed_sequencer_tick_duration_seconds",
      help: "Duration of sequencer ticks that held their shard's lock (one shard, one transaction each).",
      buckets: SECONDS_FAST,
      registers: workersOnly,
    }),
    feedBatchSize: new Histogram({
      name: "feed_sequencer_batch_size",
      help: "Pending rows one sequencer tick took (numbered or dropped), per tick that held its shard's lock.",
      buckets: [0, 1, 5, 10, 50, 100, 500, 1000, 2500, 5000],
      registers: workersOnly,
    }),

    // Push to the integrators' webhook endpoints (DESIGN §12).
    webhookDeliveries: new Counter({
      name: "webhook_deliveries_total",
      help: "Posts of events to webhook endpoints, by outcome: acknowledged (2xx), failed (another status or no connection), timeout, gone (410: the endpoint is disabled), refused (the URL leads to a private address).",
      labelNames: ["outcome"] as const,
      registers: workersOnly,
    }),
    webhookDeliveryLatency: new Histogram({
      name: "webhook_delivery_duration_seconds",
      help: "How long receivers took to answer a post.",
      buckets: SECONDS_SLOW,
      registers: workersOnly,
    }),
    webhookDeliveryLag: new Histogram({
      name: "webhook_delivery_lag_seconds",
      help: "From an event happening to its endpoint acknowledging it (retries and outages included).",
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600, 86_400],
      registers: workersOnly,
    }),
    webhookEndpoints: new Gauge({
      name: "webhook_endpoints",
      help: "Webhook endpoints by state: enabled, failing (enabled, its last delivery failed), disabled; read at scrape time.",
      labelNames: ["state"] as const,
      registers: apiOnly,
    }),
    webhookLongestFailure: new Gauge({
      name: "webhook_endpoint_longest_failure_seconds",
      help: "How long the longest-failing event of any enabled endpoint has been failing (0 when none); read at scrape time.",
      registers: apiOnly,
    }),

    // Provider webhooks.
    webhookEvents: new Counter({
      name: "webhook_events_received_total",
      help: "Events in signed provider webhooks, stored for the workers (provider retries included), by kind (message, status).",
      labelNames: ["kind"] as const,
      registers,
    }),
    webhookRejected: new Counter({
      name: "webhook_rejected_total",
      help: "Provider webhooks (or parts of them) refused or dropped, by reason: bad_signature (401), bad_body, unknown_phone_number (acknowledged, not stored).",
      labelNames: ["reason"] as const,
      registers,
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
