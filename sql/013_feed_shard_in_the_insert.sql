-- The one writer of feed rows (src/messages/store.ts) names each row's shard in its insert, the
-- shard count read once per statement; the trigger of sql/010 stays for any other writer (tools,
-- tests) but now fires only for a row that names none. Before, it ran a PL/pgSQL function and a
-- query of feed_shards for every row of every accepted or received message.
ALTER TABLE feed_pending ALTER COLUMN shard DROP DEFAULT;
DROP TRIGGER feed_pending_shard ON feed_pending;
CREATE TRIGGER feed_pending_shard BEFORE INSERT ON feed_pending
  FOR EACH ROW WHEN (NEW.shard IS NULL) EXECUTE FUNCTION feed_pending_set_shard();
