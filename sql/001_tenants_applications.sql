-- Tenants (the businesses) and their API applications (OAuth clients).
-- Ids are opaque, case-sensitive base62 strings: COLLATE "C" keeps comparisons byte-exact.

CREATE TABLE tenants (
  id           text COLLATE "C" PRIMARY KEY,
  name         text NOT NULL,
  -- NULL: the service default (DAILY_SEND_QUOTA).
  daily_quota  integer CHECK (daily_quota >= 0),
  created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE applications (
  client_id      text COLLATE "C" PRIMARY KEY,
  tenant_id      text COLLATE "C" NOT NULL REFERENCES tenants (id),
  name           text NOT NULL,
  -- SHA-256 of the client secret; the secret itself is never stored (it is high-entropy, so a
  -- fast digest is safe, like API keys).
  secret_digest  bytea NOT NULL,
  scopes         text[] NOT NULL,
  read_limit     integer NOT NULL DEFAULT 5 CHECK (read_limit > 0),
  send_limit     integer NOT NULL DEFAULT 3 CHECK (send_limit > 0),
  revoked_at     timestamptz,
  last_token_at  timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX applications_tenant_idx ON applications (tenant_id);
