-- The status statement folds a message's events once, with message_status_steps (sql/016): its
-- steps are the events of the log and its last step the message's new status and failure. The
-- fold that returned only the end state is no longer used.
DROP FUNCTION message_status_fold(text, jsonb, text[], jsonb[]);
