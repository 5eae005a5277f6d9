-- Issue 24: a client secret rotated with an overlap. The replaced secret's digest stays valid until
-- previous_secret_expires_at (chosen at rotation: none by default, so the old secret stops at once as
-- before); a later rotation replaces it. Both columns are set together or not at all.
ALTER TABLE applications
  ADD COLUMN previous_secret_digest bytea,
  ADD COLUMN previous_secret_expires_at timestamptz,
  ADD CONSTRAINT applications_previous_secret_pair
    CHECK ((previous_secret_digest IS NULL) = (previous_secret_expires_at IS NULL));

-- Issue 24: why the provider rejected a template (Graph's `rejected_reason`, e.g. INVALID_FORMAT), as
-- the template sync last saw it; null when the provider gives none (or NONE) or the template is not
-- rejected. Shown on the panel's Senders & templates page.
ALTER TABLE templates ADD COLUMN rejected_reason text;
