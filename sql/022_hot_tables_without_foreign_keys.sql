-- Issue 25 (half the CPU per message): a foreign key costs one trigger lookup of its parent per row
-- written. On the tables every message, status and inbound event writes, that was ~7 lookups per
-- accepted send (tenants 3.8 sequential scans, senders 0.9, contacts) and 2 per stored status: about a
-- fifth of Postgres's CPU per accepted message (bench/send.ts --batch, measured with these dropped).
-- Their parents (tenants, senders, contacts) are never deleted, and every id written comes from a
-- lookup of the parent in the same tenant (the send path, the webhook's sender, the message writer's
-- own contact upsert), so the keys guarded nothing the code does not. Low-volume tables keep theirs.
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_tenant_id_fkey;
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_contact_id_fkey;
ALTER TABLE messages DROP CONSTRAINT IF EXISTS messages_sender_id_fkey;
ALTER TABLE contacts DROP CONSTRAINT IF EXISTS contacts_tenant_id_fkey;
ALTER TABLE conversations DROP CONSTRAINT IF EXISTS conversations_contact_id_fkey;
ALTER TABLE conversations DROP CONSTRAINT IF EXISTS conversations_tenant_id_fkey;
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_tenant_id_fkey;
ALTER TABLE status_events DROP CONSTRAINT IF EXISTS status_events_sender_id_fkey;
ALTER TABLE inbound_events DROP CONSTRAINT IF EXISTS inbound_events_sender_id_fkey;
ALTER TABLE inbound_events DROP CONSTRAINT IF EXISTS inbound_events_tenant_id_fkey;
