-- The web panel (issue 6): its users, each belonging to one tenant, and their sign-in sessions.

CREATE TABLE panel_users (
  id             text COLLATE "C" PRIMARY KEY,
  tenant_id      text COLLATE "C" NOT NULL REFERENCES tenants (id),
  -- Stored lower-cased: an address is one user whatever case it is typed in.
  email          text NOT NULL UNIQUE CHECK (email = lower(email)),
  -- Bun.password (argon2id, memory-hard); the password itself is never stored.
  password_hash  text NOT NULL,
  created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX panel_users_tenant_idx ON panel_users (tenant_id);

-- A session is known by the SHA-256 of its cookie value: a leaked table does not sign anyone in.
CREATE TABLE panel_sessions (
  token_digest  bytea PRIMARY KEY,
  user_id       text COLLATE "C" NOT NULL REFERENCES panel_users (id) ON DELETE CASCADE,
  tenant_id     text COLLATE "C" NOT NULL REFERENCES tenants (id),
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL
);
CREATE INDEX panel_sessions_user_idx ON panel_sessions (user_id);
CREATE INDEX panel_sessions_expiry_idx ON panel_sessions (expires_at);
