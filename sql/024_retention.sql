-- Issue 25, retention: how long a tenant's messages are kept (Twilio keeps logs 400 days). A
-- fraction of a day is allowed (tests and the soak bench roll data within minutes).
ALTER TABLE tenants
  ADD COLUMN message_retention_days double precision NOT NULL DEFAULT 400
    CHECK (message_retention_days > 0 AND message_retention_days <= 3650);

-- The tenant's messages by age, both directions: the retention walks its oldest rows in bounded
-- batches. It replaces the outbound-only index of the daily quota count, which reads it index-only
-- (direction included), so the hot path writes no more index entries than before.
CREATE INDEX messages_tenant_created_idx ON messages (tenant_id, created_at) INCLUDE (direction);
DROP INDEX messages_outbound_day_idx;

-- Finalized inbound events (the provider's payloads) are kept a week for the provider's webhook
-- retries to dedupe against, then dropped oldest first.
CREATE INDEX inbound_events_finalized_idx ON inbound_events (received_at) WHERE finalized_at IS NOT NULL;
