-- The event log (DESIGN §12): one ordered log of events per tenant, positioned after commit like the
-- feed (§6). The statements that change a message add its event to event_pending (the message
-- writer for message.received, the send record and the status statement for sent, delivered, read
-- and failed); the feed's sequencer numbers them per tenant into events, in the same tick.
CREATE TABLE event_pending (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id   text COLLATE "C" NOT NULL,
  shard       smallint NOT NULL,
  type        text NOT NULL,
  message_id  text COLLATE "C" NOT NULL,
  -- The message as the event left it: its status (none for a received message), and its failure.
  status      text,
  failure     jsonb,
  created_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX event_pending_shard_idx ON event_pending (shard, id);

CREATE TABLE event_heads (
  tenant_id  text COLLATE "C" PRIMARY KEY,
  last_seq   bigint NOT NULL
);

CREATE TABLE events (
  tenant_id   text COLLATE "C" NOT NULL,
  seq         bigint NOT NULL,
  id          text COLLATE "C" NOT NULL UNIQUE,
  type        text NOT NULL,
  message_id  text COLLATE "C" NOT NULL,
  status      text,
  failure     jsonb,
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, seq)
);
-- Retention (30 days) finds the oldest by their age.
CREATE INDEX events_created_idx ON events (created_at);

-- The statuses a message passes through as its events are folded oldest first through the rule
-- (message_status_after): one row per event that moved it, in order, with the failure that came
-- with a `failed`. A status the provider never reported is not passed through (accepted -> read
-- passes through `read` alone).
CREATE FUNCTION message_status_steps(status text, events text[], failures jsonb[])
RETURNS TABLE (step integer, reached text, failure jsonb)
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  current text := status;
  next text;
BEGIN
  step := 0;
  FOR i IN 1 .. coalesce(array_length(events, 1), 0) LOOP
    next := message_status_after(current, events[i]);
    IF next IS NOT NULL THEN
      current := next;
      step := step + 1;
      reached := next;
      failure := CASE WHEN next = 'failed' THEN failures[i] END;
      RETURN NEXT;
    END IF;
  END LOOP;
END
$$;
