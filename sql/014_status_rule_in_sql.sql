-- The monotonic rule of a message's status (DESIGN §3), defined once, here: the webhook store
-- applies statuses of known messages in its own statement, and the status drain applies the
-- backlog (events that overtook their send) with the same statement (src/outbound/status.ts).
-- accepted -> sent -> delivered -> read, skips allowed; failed only from accepted or sent; a later
-- delivered or read supersedes failed; anything else (out of order, unknown) changes nothing (NULL).
CREATE FUNCTION message_status_after(current text, event text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN event = 'failed' THEN CASE WHEN current IN ('accepted', 'sent') THEN 'failed' END
    WHEN event NOT IN ('sent', 'delivered', 'read') THEN NULL
    WHEN current = 'failed' THEN CASE WHEN event IN ('delivered', 'read') THEN event END
    WHEN array_position(ARRAY['accepted', 'sent', 'delivered', 'read'], event)
       > array_position(ARRAY['accepted', 'sent', 'delivered', 'read'], current) THEN event
  END
$$;

-- A message's events, oldest first, folded through the rule: its status, and its failure (that of
-- the event that made it `failed`; none once it is anything else).
CREATE FUNCTION message_status_fold(
  INOUT status text, INOUT failure jsonb, events text[], failures jsonb[])
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  next text;
BEGIN
  FOR i IN 1 .. coalesce(array_length(events, 1), 0) LOOP
    next := message_status_after(status, events[i]);
    IF next IS NOT NULL THEN
      status := next;
      failure := CASE WHEN next = 'failed' THEN failures[i] END;
    END IF;
  END LOOP;
END
$$;
