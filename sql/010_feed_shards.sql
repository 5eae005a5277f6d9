-- The feed sequencer, sharded by tenant (DESIGN §6, docs/operations.md "Feed shards"). Each
-- feed_pending row carries its tenant's shard, set on insert from the count in feed_shards, and each
-- shard is numbered under its own advisory lock, so shards are numbered in parallel; a tenant is in
-- one shard, so its positions are still given one tick at a time. The count only grows (FEED_SHARDS
-- raises it when a worker starts): rows queued before a growth keep their shard, which still exists.
CREATE TABLE feed_shards (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  shards     integer NOT NULL CHECK (shards BETWEEN 1 AND 256)
);
INSERT INTO feed_shards (shards) VALUES (1);

-- The one definition of a tenant's shard (also for operators: which shard is tenant X in).
CREATE FUNCTION feed_shard_of(tenant_id text, shards integer) RETURNS integer
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT (abs(hashtext(tenant_id)::bigint) % shards)::integer $$;

-- Every writer of feed_pending (accept, finalize, tests, benchmarks) gets the shard without naming it.
CREATE FUNCTION feed_pending_set_shard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.shard := feed_shard_of(NEW.tenant_id, (SELECT shards FROM feed_shards));
  RETURN NEW;
END $$;

-- Rows already queued belong to shard 0, the only shard until now.
ALTER TABLE feed_pending ADD COLUMN shard smallint NOT NULL DEFAULT 0;
CREATE TRIGGER feed_pending_shard BEFORE INSERT ON feed_pending
  FOR EACH ROW EXECUTE FUNCTION feed_pending_set_shard();

-- A shard's sequencer takes its oldest rows first; the backlog age is the minimum over the shards.
DROP INDEX feed_pending_queued_idx;
CREATE INDEX feed_pending_shard_queued_idx ON feed_pending (shard, queued_at, message_id);
