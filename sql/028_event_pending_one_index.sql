-- Issue 25: event_pending keeps one index. The sequencer takes a shard's oldest rows by (shard, id)
-- and deletes them by tuple id (src/feed/sequencer.ts); nothing looks a pending event up by its id
-- alone. The primary key on id was a second index entry written (and later vacuumed) for every
-- event, three for a delivered message. (shard, id) becomes the primary key: the one index the
-- sequencer reads, and still a replica identity for a logical replica's deletes.
ALTER TABLE event_pending DROP CONSTRAINT event_pending_pkey;
DROP INDEX event_pending_shard_idx;
ALTER TABLE event_pending ADD PRIMARY KEY (shard, id);
