-- Status events carry the sender whose phone_number_id the webhook named: an event applies only to a
-- message of that sender (src/outbound/status.ts). NULL: stored before this column existed, applied
-- as before.
ALTER TABLE status_events ADD COLUMN sender_id text COLLATE "C" REFERENCES senders (id);

-- Deduplicate per sender: an event for the same id and status from another number must not keep
-- the rightful sender's event out.
ALTER TABLE status_events DROP CONSTRAINT status_events_provider_message_id_status_key;
ALTER TABLE status_events
  ADD CONSTRAINT status_events_provider_message_id_status_sender_key
  UNIQUE NULLS NOT DISTINCT (provider_message_id, status, sender_id);
