-- Webhook endpoints (DESIGN §12): each reads the tenant's event log (sql/016) from its own cursor.
-- Everything at or before cursor_seq is acknowledged (or not subscribed); past it, the events the
-- receiver already acknowledged out of order (other contacts go on while one waits) and the ones
-- waiting for a retry have a row in webhook_deliveries.
CREATE TABLE webhook_endpoints (
  id                         text COLLATE "C" PRIMARY KEY,
  tenant_id                  text COLLATE "C" NOT NULL REFERENCES tenants (id),
  url                        text NOT NULL,
  events                     text[] NOT NULL,
  description                text,
  status                     text NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'disabled')),
  disabled_reason            text,
  -- Sealed with PROVIDER_TOKEN_KEY (src/crypto/secret-box.ts), the endpoint's id as context.
  secret                     text NOT NULL,
  -- After a rotation the replaced secrets sign too, each until its expiry: [{secret (sealed, the
  -- id + ':previous' as context), expires_at}]. Rotating twice keeps both old secrets working.
  previous_secrets           jsonb NOT NULL DEFAULT '[]',
  cursor_seq                 bigint NOT NULL,
  -- Raised by a replay or a change of event types: a delivery run of an older generation stops
  -- and writes nothing.
  generation                 integer NOT NULL DEFAULT 0,
  -- The delivery run that owns the endpoint now: a run whose job was handed to another worker
  -- (its lock lapsed) finds another lease at its next write and stops.
  lease                      text,
  -- The earliest retry due of an event waiting for one: the sweeper nudges the endpoint then.
  retry_at                   timestamptz,
  -- Every attempt of the last run failed (the receiver is down): nothing is tried before this, so
  -- a down receiver gets a few requests per backoff step, not one per contact.
  paused_until               timestamptz,
  last_success_at            timestamptz,
  last_failure_at            timestamptz,
  last_failure_status        integer,
  last_failure_error         text,
  created_at                 timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_tenant_idx ON webhook_endpoints (tenant_id, created_at, id);

CREATE TABLE webhook_deliveries (
  endpoint_id      text COLLATE "C" NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
  seq              bigint NOT NULL,
  acknowledged     boolean NOT NULL,
  attempts         integer NOT NULL DEFAULT 0,
  first_failed_at  timestamptz,
  next_attempt_at  timestamptz,
  PRIMARY KEY (endpoint_id, seq)
);
