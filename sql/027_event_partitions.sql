-- Issue 25: the event log is partitioned by time, so that its expiry is a partition drop rather than
-- a delete of every row (src/events/partitions.ts). The maintenance worker creates the partitions
-- ahead of time (EVENT_PARTITION_INTERVAL_MS wide, a day by default) and drops one once every
-- tenant's bound (its message retention, at most the log's 30 days) has passed its end. A row whose
-- time no partition covers yet (no maintenance worker running, as in the tests) lands in the
-- default partition, and moves into its own when that is created.
--
-- What the log gives up and why that is safe: PostgreSQL enforces a unique index on a partitioned
-- table only if it holds the partition key. (tenant_id, seq) stays unique by construction, as it was
-- in practice: the sequencer is its one writer and numbers a tenant's events under the row lock of
-- its event_heads row. Event ids are random (122 bits) and nothing looks an event up by its id.
ALTER TABLE events RENAME TO events_unpartitioned;
ALTER INDEX events_created_idx RENAME TO events_unpartitioned_created_idx;

CREATE TABLE events (
  tenant_id   text COLLATE "C" NOT NULL,
  seq         bigint NOT NULL,
  id          text COLLATE "C" NOT NULL,
  type        text NOT NULL,
  message_id  text COLLATE "C" NOT NULL,
  status      text,
  failure     jsonb,
  created_at  timestamptz NOT NULL
) PARTITION BY RANGE (created_at);
-- A tenant's log in order (GET /events, webhook delivery, retention's oldest first).
CREATE INDEX events_tenant_seq_idx ON events (tenant_id, seq);
-- A message's events within a time window (the panel's message details).
CREATE INDEX events_created_idx ON events (created_at);
CREATE TABLE events_default PARTITION OF events DEFAULT;

-- The rows already logged get daily partitions (UTC days), up to the end of the newest row's day;
-- from there on the maintenance worker creates them at its own interval.
DO $$
DECLARE
  day timestamptz;
  last_day timestamptz;
BEGIN
  SELECT date_trunc('day', min(created_at) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
         date_trunc('day', max(created_at) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
    INTO day, last_day FROM events_unpartitioned;
  WHILE day <= last_day LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF events FOR VALUES FROM (%L) TO (%L)',
      'events_' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD"_"HH24MISS'), day, day + interval '1 day');
    day := day + interval '1 day';
  END LOOP;
END
$$;

INSERT INTO events SELECT * FROM events_unpartitioned;
DROP TABLE events_unpartitioned;
