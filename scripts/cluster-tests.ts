/**
 * The test files CI runs a second time with every process on a Redis Cluster (`bun run test
 * --cluster`). A Cluster changes how Redis behaves only for some commands: a script or command over
 * several keys (they must share a slot), BullMQ's queues (hash-tagged prefixes, blocking reads,
 * scripts), pipelines split by slot, SCANs that must visit every master, and a master's failover.
 * Each of those paths has a file here that exercises it; the one-key rate-limit script every request
 * spends runs in all of them. The fault suite's `--redis-cluster` scenarios add the send, status and
 * webhook pipelines under load through a failover.
 */
const CLUSTER_FILES: Record<string, string> = {
  "test/messages/send-admission.test.ts":
    "send_admission.lua: a turn's sends, their window, claim and quota keys",
  "test/messages/message-batch.test.ts": "reserve_quota.lua / refund_quota.lua, per-item claims",
  "test/messages/idempotency-release.test.ts": "release_claim.lua",
  "test/messages/scheduled-sends.test.ts": "the scheduler's due sends into the send queue, cancels",
  "test/outbound/send-pipeline.test.ts": "the send queue, take_send_tokens.lua, the provider-id stash",
  "test/outbound/status-batch.test.ts": "the status queue and its drain nudges",
  "test/inbound/finalize-batch.test.ts": "the finalize queue",
  "test/feed/feed-head.test.ts": "raise_feed_head.lua, the sequencer's nudges",
  "test/push/webhook-delivery.test.ts": "the webhook queue, endpoint leases, the attempt log",
  "test/panel/panel-auth.test.ts": "attempt_window.lua over several keys (sign-in limits)",
  "test/ops/metrics.test.ts": "every process publishes its metrics; a scrape SCANs every master",
  "test/senders/directory-version.test.ts": "the directory version the admission script reads",
  "test/runtime/consumer-supervisor.test.ts": "BullMQ consumers replaced on fresh connections",
  "test/faults/redis-failover.test.ts": "a master killed, its replica promoted",
  "test/faults/outage.test.ts": "Redis gone and back",
  "test/faults/dependency-faults.test.ts": "503 and recovery when Redis or Postgres goes away",
};

/** Whether `file` (a path like test/area/name.test.ts) is one CI runs on a Cluster too. */
export function runsOnCluster(file: string): boolean {
  return file in CLUSTER_FILES;
}
