-- The reading side of the feed (DESIGN §6): the sequencer takes the oldest hand-offs first, so none
-- waits behind a steady stream of newer ones, and the backlog metric reads the oldest in one probe.
CREATE INDEX feed_pending_queued_idx ON feed_pending (queued_at, message_id);
