-- The batch send pipeline (issue 13, parts 1, 3 and 7): per-sender pace, per-message backoff and
-- the per-(sender, contact) order of sends.

-- Messages per second the send workers together hand to the provider for this sender (a Redis
-- token bucket, src/redis/scripts/take_send_tokens.lua). WhatsApp's default tier is 80.
ALTER TABLE senders ADD COLUMN mps integer NOT NULL DEFAULT 80 CHECK (mps BETWEEN 1 AND 100000);

-- A retryable failure waits until then before it is tried again; the message keeps holding the
-- later messages of its (sender, contact) pair meanwhile.
ALTER TABLE messages ADD COLUMN send_not_before timestamptz;
-- Attempts the provider refused as throttling (130429, 131056, ...): counted in send_attempts
-- too, but never against SEND_ATTEMPTS.
ALTER TABLE messages ADD COLUMN send_throttled integer NOT NULL DEFAULT 0;

-- The claim's order check: is there an earlier unfinished message of this (sender, contact)?
-- Earlier = lower seq (the insert order, which is the commit order of one api process).
CREATE INDEX messages_unsent_pair_idx ON messages (sender_id, contact_id, seq) WHERE status = 'accepted';
