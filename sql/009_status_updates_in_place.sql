-- Status webhooks update a message in place (HOT: no new entry in any of its indexes).
-- Postgres updates a row in place only when no indexed column changes, and a column named in a
-- partial index's WHERE counts. The two indexes of unsent messages said `status = 'accepted'`, so
-- every delivered and read (two of a message's four updates) wrote seven new index entries. They
-- now name what "not sent yet" means in columns that stop changing once a message is sent: an
-- outbound message without a provider id and without a failure (status 'accepted', the one state
-- with neither; src/outbound/unsent.ts).
DROP INDEX messages_unsent_idx;
CREATE INDEX messages_unsent_idx ON messages (created_at)
  WHERE direction = 'outbound' AND provider_message_id IS NULL AND failure IS NULL;
DROP INDEX messages_unsent_pair_idx;
CREATE INDEX messages_unsent_pair_idx ON messages (sender_id, contact_id, seq)
  WHERE direction = 'outbound' AND provider_message_id IS NULL AND failure IS NULL;
