-- Issue 25, data lifecycle: vacuum kept in step with the churn. PostgreSQL's defaults vacuum a
-- table once a fifth of it is dead; on messages (a status webhook rewrites a row three times, and
-- retention deletes one row per row inserted) that is millions of dead tuples between rounds on a
-- large table. These vacuum and analyze the hot tables at 2-5% instead, and the hand-off tables
-- (rows inserted, taken and deleted within seconds) every few thousand rows whatever their size.
ALTER TABLE messages SET (
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_analyze_scale_factor = 0.02,
  autovacuum_vacuum_insert_scale_factor = 0.05
);
ALTER TABLE feed_entries SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE events SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE idempotency_keys SET (autovacuum_vacuum_scale_factor = 0.05, autovacuum_vacuum_insert_scale_factor = 0.05);
ALTER TABLE conversations SET (autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE feed_pending SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE event_pending SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE status_events SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
ALTER TABLE inbound_events SET (autovacuum_vacuum_scale_factor = 0.05);
