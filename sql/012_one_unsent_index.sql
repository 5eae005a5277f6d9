-- One index of unsent messages, not two. With both, the planner took the one on created_at (the
-- smaller) for the send claim's order check as well, and that check then read every unsent entry
-- (and every entry of a message sent since the last vacuum) instead of its (sender, contact) pair's:
-- ~95 entries per probe under load. The pair index serves the sweeper and the drain's scan of
-- unsent messages too (they read all of it anyway), and every accepted message now writes one
-- index entry fewer.
DROP INDEX messages_unsent_idx;
