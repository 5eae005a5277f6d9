-- A status that waits for its message (it overtook the send's answer) keeps who the provider says
-- received it (DESIGN §14: recipient_id when the phone is shared, recipient_user_id,
-- recipient_parent_user_id), so that the drain attaches the BSUID to the message's contact as the
-- webhook store does for a status applied at once. Metadata only (nullable columns, no default): a
-- brief ACCESS EXCLUSIVE lock on status_events, no rewrite, no scan.
ALTER TABLE status_events
  ADD COLUMN recipient_phone text COLLATE "C",
  ADD COLUMN recipient_user_id text COLLATE "C",
  ADD COLUMN recipient_parent_user_id text COLLATE "C";
