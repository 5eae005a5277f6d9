-- Issue 42: an endpoint created without `events` receives every type, new ones included (DESIGN §12).
-- It used to store the list of types there were when it was created, so it missed every type added
-- since. NULL now means every type; a list means those types only. Endpoints whose list was every
-- type there is today (message.received, .sent, .delivered, .read, .failed, .canceled) become
-- "every type": they were created without `events` (or chose them all, which this cannot tell apart).
ALTER TABLE webhook_endpoints ALTER COLUMN events DROP NOT NULL;

UPDATE webhook_endpoints
SET events = NULL
WHERE events @> ARRAY['message.received', 'message.sent', 'message.delivered', 'message.read',
                      'message.failed', 'message.canceled']::text[]
  AND events <@ ARRAY['message.received', 'message.sent', 'message.delivered', 'message.read',
                      'message.failed', 'message.canceled']::text[];
