-- DESIGN §13: scheduled sends, cancel, expiry and opt-out.
--
-- `parked` takes a send out of delivery without touching `status` (which status webhooks update in
-- place, sql/009): 'scheduled' until its `send_at` (then the scheduler clears it and sets `accepted`),
-- 'canceled' for good. The unsent index and every "unsent" query (src/db/unsent.ts) say
-- `parked IS NULL`, so a parked message never holds the later messages of its (sender, contact) pair.
ALTER TABLE messages
  ADD COLUMN parked text CHECK (parked IN ('scheduled', 'canceled')),
  ADD COLUMN send_at timestamptz,
  ADD COLUMN valid_for integer,
  -- acceptance (or send_at) + valid_for: the claim fails a message past it with `expired`.
  ADD COLUMN expires_at timestamptz;

DROP INDEX messages_unsent_pair_idx;
CREATE INDEX messages_unsent_pair_idx ON messages (sender_id, contact_id, seq)
  WHERE direction = 'outbound' AND provider_message_id IS NULL AND failure IS NULL AND parked IS NULL;

-- The scheduler's queue: scheduled messages by due time.
CREATE INDEX messages_scheduled_idx ON messages (send_at, seq) WHERE parked = 'scheduled';

-- Opt-out by keyword, by provider failure 131050 or by hand; null = may be messaged.
ALTER TABLE contacts ADD COLUMN opted_out_at timestamptz;
