-- Sending: idempotency records (the durable backstop behind Redis's fast path), the send-attempt
-- guard on messages, and the client reference the provider echoes in status webhooks.

CREATE TABLE idempotency_keys (
  application_id  text COLLATE "C" NOT NULL,
  key             text COLLATE "C" NOT NULL,
  tenant_id       text COLLATE "C" NOT NULL REFERENCES tenants (id),
  -- SHA-256 of the canonical JSON of the request body.
  request_hash    bytea NOT NULL,
  message_id      text COLLATE "C" NOT NULL,
  created_at      timestamptz NOT NULL,
  PRIMARY KEY (application_id, key)
);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);

-- Set when a send worker is about to call the provider, cleared when the provider has answered.
-- Still set after a crash: the outcome is in doubt, and the message is not sent again until the
-- provider's status webhooks (which echo the message id) have had time to tell.
ALTER TABLE messages ADD COLUMN send_started_at timestamptz;

-- Graph's biz_opaque_callback_data: our msg_ id, echoed back in every status of that send.
ALTER TABLE status_events ADD COLUMN client_reference text;
CREATE INDEX status_events_client_reference_idx ON status_events (client_reference)
  WHERE client_reference IS NOT NULL;
