/**
 * The test files CI runs a second time with every process on a Redis Cluster (.ci/run). A Cluster
 * changes how Redis behaves only for some commands: a script or command over several keys (they must
 * share a slot), BullMQ's queues (hash-tagged prefixes, blocking reads, scripts), pipelines split by
 * slot, SCANs that must visit every master, and a master's failover. These files exercise those;
 * the others reach Redis only through the one-key rate-limit script of every request, which these
 * files cover as well.
 */
const CLUSTER_AREAS = [
  "messages", // send_admission.lua (a batch of keys in one slot), claims, refunds, the send queue
  "outbound", // the send and status workers: queues, pacing (take_send_tokens.lua), the stash
  "inbound", // the finalize queue and its nudges
  "feed", // raise_feed_head.lua, the sequencer's nudges
  "events", // the event log's nudges to endpoints
  "push", // the webhook queue, endpoint leases, the attempt log (attempt_window.lua)
  "faults", // Redis and Postgres outages, a Cluster failover
  "maintenance", // the sweeper's re-enqueues, retention of Redis-held markers
];
const CLUSTER_FILES = [
  "test/ops/metrics.test.ts", // every process publishes its metrics; a scrape SCANs every master
  "test/runtime/api-processes.test.ts", // several api processes sharing Redis state
  "test/runtime/consumer-supervisor.test.ts", // BullMQ consumers replaced on fresh connections
  "test/runtime/shutdown.test.ts", // workers draining their queues on SIGTERM
  "test/senders/directory-version.test.ts", // the directory version read by the admission script
  "test/hostile/hostile-limits.test.ts", // every limit (rate_limit.lua) under pressure
  "test/panel/panel-auth.test.ts", // sign-in limits (attempt_window.lua over several keys)
];

/** Whether `file` (a path like test/area/name.test.ts) is one CI runs on a Cluster too. */
export function runsOnCluster(file: string): boolean {
  const area = file.split("/")[1] ?? "";
  return CLUSTER_AREAS.includes(area) || CLUSTER_FILES.includes(file);
}
