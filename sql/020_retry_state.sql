-- Issue 24: a message waiting for a retry says why. The send record (src/outbound/record.ts) keeps
-- the error of the latest attempt that is to be retried ({code, message, retryable}, the shape of
-- `failure`), and clears it once the message is sent or fails for good. With send_attempts and
-- send_not_before it is the message's `retrying` state. Not in any index: a retry updates in place.
ALTER TABLE messages ADD COLUMN last_error jsonb;
