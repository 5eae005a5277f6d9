-- Issue 42: managing webhook endpoints (create, change, delete, rotate the secret, replay) takes its
-- own scope, webhooks:manage; reading them stays messaging:read (DESIGN §12). An application that
-- holds both messaging scopes could do all of it before: it keeps doing so. One that holds only
-- messaging:read no longer can (it could take over the event stream).
UPDATE applications
SET scopes = array_append(scopes, 'webhooks:manage')
WHERE scopes @> ARRAY['messaging:send', 'messaging:read']::text[]
  AND NOT scopes @> ARRAY['webhooks:manage']::text[];
