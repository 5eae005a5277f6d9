-- Issue 42: at most two secrets sign a delivery, the current one and one previous (DESIGN §12).
-- Every rotation used to keep the replaced secret for 24 h besides the earlier ones, so repeated
-- rotations grew the signature header without bound (a receiver answered 431). The one previous
-- secret is now a column pair (set together or not at all, like an application's, sql/021): the
-- bound is the table's, not only the signer's. Kept: each endpoint's newest previous secret still in
-- its overlap; the others stop now, as a rotation now ends them.
ALTER TABLE webhook_endpoints
  -- Sealed like `secret`, with the endpoint's id + ':previous' as context.
  ADD COLUMN previous_secret text,
  ADD COLUMN previous_secret_expires_at timestamptz,
  ADD CONSTRAINT webhook_endpoints_previous_secret_pair
    CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL));

UPDATE webhook_endpoints w
SET previous_secret = newest.secret, previous_secret_expires_at = newest.expires_at
FROM (
  SELECT DISTINCT ON (e.id) e.id, p.value ->> 'secret' AS secret, (p.value ->> 'expires_at')::timestamptz AS expires_at
  FROM webhook_endpoints e, jsonb_array_elements(e.previous_secrets) p
  WHERE (p.value ->> 'expires_at')::timestamptz > now()
  ORDER BY e.id, (p.value ->> 'expires_at')::timestamptz DESC
) newest
WHERE newest.id = w.id;

ALTER TABLE webhook_endpoints DROP COLUMN previous_secrets;
