-- DESIGN §13: a send's own reference (1-128 printable ASCII characters, not unique), stored with the
-- message and echoed on every view of it and on its events, so an integrator joins our records to
-- theirs without a lookup. Nullable, no default: adding it rewrites nothing.
ALTER TABLE messages ADD COLUMN client_reference text;
