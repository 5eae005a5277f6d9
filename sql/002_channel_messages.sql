-- The channel and its messages: senders and their templates, contacts, messages, the raw provider
-- events the webhook stores before acknowledging, uploaded media, per-contact conversation
-- summaries, and the feed's hand-off and positions (DESIGN §6).

CREATE TABLE senders (
  id                        text COLLATE "C" PRIMARY KEY,
  tenant_id                 text COLLATE "C" NOT NULL REFERENCES tenants (id),
  channel                   text NOT NULL DEFAULT 'whatsapp',
  name                      text,
  phone_number              text NOT NULL,
  provider_phone_number_id  text NOT NULL UNIQUE,
  waba_id                   text NOT NULL,
  -- The provider credential for this number (Graph API access token).
  access_token              text NOT NULL,
  active                    boolean NOT NULL DEFAULT true,
  templates_synced_at       timestamptz,
  created_at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX senders_tenant_idx ON senders (tenant_id);

CREATE TABLE templates (
  id                    text COLLATE "C" PRIMARY KEY,
  tenant_id             text COLLATE "C" NOT NULL REFERENCES tenants (id),
  sender_id             text COLLATE "C" NOT NULL REFERENCES senders (id),
  provider_template_id  text,
  name                  text NOT NULL,
  language              text NOT NULL,
  category              text NOT NULL,
  -- Provider status (APPROVED, PENDING, REJECTED, ...); only APPROVED is listed or sendable.
  status                text NOT NULL,
  components            jsonb NOT NULL,
  -- {body: [names], header: [names], buttons: [names]} derived from the components.
  variables             jsonb NOT NULL,
  preview               text NOT NULL,
  -- TEXT, IMAGE, VIDEO, DOCUMENT, LOCATION or NULL when the template has no header.
  header_format         text,
  updated_at            timestamptz NOT NULL DEFAULT now(),
  UNIQUE (sender_id, name, language)
);
CREATE INDEX templates_tenant_sender_idx ON templates (tenant_id, sender_id, name);

CREATE TABLE contacts (
  id               text COLLATE "C" PRIMARY KEY,
  tenant_id        text COLLATE "C" NOT NULL REFERENCES tenants (id),
  channel          text NOT NULL DEFAULT 'whatsapp',
  phone            text NOT NULL,
  name             text,
  -- Provider timestamp of the newest inbound message: the 24-hour window runs from here.
  last_inbound_at  timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, channel, phone)
);

CREATE TABLE messages (
  -- Internal order and tie-break for messages in the same second; never exposed.
  seq                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- msg_ id; NULL only for legacy rows imported from before structured storage.
  id                   text COLLATE "C" UNIQUE,
  tenant_id            text COLLATE "C" NOT NULL REFERENCES tenants (id),
  contact_id           text COLLATE "C" NOT NULL REFERENCES contacts (id),
  sender_id            text COLLATE "C" REFERENCES senders (id),
  direction            text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
  -- text, template, image, video, document, audio, or system_<kind> (never in the feed).
  type                 text NOT NULL,
  preview              text NOT NULL,
  text                 text,
  media_type           text,
  media_filename       text,
  -- NULL for inbound; accepted, sent, delivered, read, failed for outbound.
  status               text,
  -- {code, message, retryable} when status is failed.
  failure              jsonb,
  -- Outbound: the application that sent it and what it asked to send (for the send worker).
  application_id       text COLLATE "C",
  content              jsonb,
  provider_message_id  text,
  send_attempts        integer NOT NULL DEFAULT 0,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL DEFAULT now(),
  CHECK ((direction = 'inbound') = (status IS NULL))
);
CREATE UNIQUE INDEX messages_provider_message_idx ON messages (provider_message_id)
  WHERE provider_message_id IS NOT NULL;
CREATE INDEX messages_history_idx ON messages (tenant_id, contact_id, created_at, seq);
-- The sweeper's view of outbound messages not yet handed to the provider.
CREATE INDEX messages_unsent_idx ON messages (created_at) WHERE status = 'accepted';
-- Rebuilding a lost daily quota counter counts a tenant's outbound messages of one UTC day.
CREATE INDEX messages_outbound_day_idx ON messages (tenant_id, created_at) WHERE direction = 'outbound';

-- Inbound messages exactly as the provider's webhook delivered them, stored before the 200.
-- The provider's message id dedupes the provider's retries.
CREATE TABLE inbound_events (
  provider_message_id  text PRIMARY KEY,
  tenant_id            text COLLATE "C" NOT NULL REFERENCES tenants (id),
  sender_id            text COLLATE "C" NOT NULL REFERENCES senders (id),
  -- {message: <Cloud API message object>, contact: <contacts[] entry or null>}
  payload              jsonb NOT NULL,
  received_at          timestamptz NOT NULL DEFAULT now(),
  finalized_at         timestamptz,
  message_id           text COLLATE "C"
);
CREATE INDEX inbound_events_unfinalized_idx ON inbound_events (received_at) WHERE finalized_at IS NULL;

-- Provider status events; kept until the message they name exists (a status can overtake the
-- send response), then applied once.
CREATE TABLE status_events (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  provider_message_id  text NOT NULL,
  status               text NOT NULL,
  provider_timestamp   timestamptz NOT NULL,
  errors               jsonb,
  received_at          timestamptz NOT NULL DEFAULT now(),
  applied_at           timestamptz,
  UNIQUE (provider_message_id, status)
);
CREATE INDEX status_events_unapplied_idx ON status_events (provider_message_id) WHERE applied_at IS NULL;

CREATE TABLE media (
  id                 text COLLATE "C" PRIMARY KEY,
  tenant_id          text COLLATE "C" NOT NULL REFERENCES tenants (id),
  sender_id          text COLLATE "C" NOT NULL REFERENCES senders (id),
  type               text NOT NULL CHECK (type IN ('image', 'video', 'document')),
  mime_type          text NOT NULL,
  filename           text,
  size_bytes         integer NOT NULL,
  provider_media_id  text NOT NULL,
  created_at         timestamptz NOT NULL,
  expires_at         timestamptz NOT NULL
);

-- One row per contact with messages: what GET /conversations lists, kept current by the
-- transactions that finalize inbound and accept outbound messages.
CREATE TABLE conversations (
  contact_id         text COLLATE "C" PRIMARY KEY REFERENCES contacts (id),
  tenant_id          text COLLATE "C" NOT NULL REFERENCES tenants (id),
  last_message_seq   bigint NOT NULL,
  last_message_at    timestamptz NOT NULL,
  last_outbound_at   timestamptz,
  panel_read_at      timestamptz,
  -- Inbound messages newer than both last_outbound_at and panel_read_at (DESIGN §3).
  unread             integer NOT NULL DEFAULT 0
);
CREATE INDEX conversations_order_idx ON conversations (tenant_id, last_message_at, last_message_seq);

-- The feed (DESIGN §6). Finalizing transactions add to feed_pending; the sequencer numbers them.
CREATE TABLE feed_pending (
  message_id  text COLLATE "C" PRIMARY KEY,
  tenant_id   text COLLATE "C" NOT NULL,
  queued_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE TABLE feed_heads (
  tenant_id  text COLLATE "C" PRIMARY KEY,
  last_seq   bigint NOT NULL
);
CREATE TABLE feed_entries (
  tenant_id   text COLLATE "C" NOT NULL,
  seq         bigint NOT NULL,
  message_id  text COLLATE "C" NOT NULL UNIQUE,
  PRIMARY KEY (tenant_id, seq)
);
CREATE TABLE feed_epoch (
  singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  epoch      integer NOT NULL
);
INSERT INTO feed_epoch (epoch) VALUES (1);
