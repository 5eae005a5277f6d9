-- Issue 43 (DESIGN §14): a contact is a person the provider knows by a phone, a business-scoped user
-- id (BSUID), or both. A phone may be withheld (a user with a username), so it becomes nullable.
-- Metadata only on contacts (nullable columns without defaults); the two indexes read contacts once
-- (a SHARE lock on contacts alone while they build: writes to contacts wait, messages are untouched).
ALTER TABLE contacts ALTER COLUMN phone DROP NOT NULL;
ALTER TABLE contacts
  -- The BSUID the provider uses now (CC.xxxx), the parent BSUID of linked portfolios, the username
  -- (shown, never a key), and for a contact merged into another (one person seen as two) the survivor.
  ADD COLUMN user_id text COLLATE "C",
  ADD COLUMN parent_user_id text COLLATE "C",
  ADD COLUMN username text,
  ADD COLUMN merged_into text COLLATE "C";

-- At most one live contact per BSUID in a tenant (per phone: the existing UNIQUE (tenant_id, channel,
-- phone); a merged contact keeps neither its phone nor its BSUID).
CREATE UNIQUE INDEX contacts_live_user_id ON contacts (tenant_id, user_id)
  WHERE user_id IS NOT NULL AND merged_into IS NULL;
CREATE INDEX contacts_parent_user_id ON contacts (tenant_id, parent_user_id)
  WHERE parent_user_id IS NOT NULL;

-- Every BSUID a contact has had, the current one too: after user_changed_user_id, or a merge, the old
-- one still finds the person (lookups and sends map it to the contact, and so to the new BSUID).
CREATE TABLE contact_user_ids (
  tenant_id   text COLLATE "C" NOT NULL,
  user_id     text COLLATE "C" NOT NULL,
  contact_id  text COLLATE "C" NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, user_id)
);
CREATE INDEX contact_user_ids_contact_idx ON contact_user_ids (contact_id);

-- The event log carries events about a contact too (contact.merged, DESIGN §14): such an event names
-- no message, but its contact (the survivor) and what else it says (`{merged: [ids]}`). Metadata
-- only (nullable columns without defaults, a NOT NULL dropped): brief ACCESS EXCLUSIVE locks on
-- event_pending and events (and its partitions), no rewrite, no scan.
ALTER TABLE event_pending ALTER COLUMN message_id DROP NOT NULL,
  ADD COLUMN contact_id text COLLATE "C",
  ADD COLUMN data jsonb;
ALTER TABLE events ALTER COLUMN message_id DROP NOT NULL,
  ADD COLUMN contact_id text COLLATE "C",
  ADD COLUMN data jsonb;
