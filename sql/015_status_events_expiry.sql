-- A waiting status of a message never known by its provider id expires after 7 days
-- (deleteExpiredStatusEvents in src/outbound/status.ts, run by the maintenance worker): the backlog
-- is found by its age without reading the rest.
CREATE INDEX status_events_received_idx ON status_events (received_at);
