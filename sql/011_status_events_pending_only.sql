-- Status events are kept only until they are applied, then deleted (src/outbound/status.ts).
-- Marking them applied was an update of every event, and not in place: `applied_at` was in the
-- WHERE of the index of unapplied events, so each mark wrote a new row version and an entry in
-- each of the table's four indexes, and the table grew forever. Now the table holds the backlog
-- only: what a drain takes is every row, and the unique index (provider_message_id, status,
-- sender_id) finds a message's events. A provider's retry of an event already applied is stored
-- and applied again, which the monotonic rule makes a no-op.
DELETE FROM status_events WHERE applied_at IS NOT NULL;
DROP INDEX status_events_unapplied_idx;
ALTER TABLE status_events DROP COLUMN applied_at;
