-- Issue 24 (inbound images and documents cannot be viewed): the provider's id of a received
-- message's media (WhatsApp's image/document/video/audio `id`), kept so the panel can fetch the file
-- from the provider with the sender's token when a person opens it (nothing is stored here but the
-- id). Null for sends and for messages without media. Nullable without a default: adding it rewrites
-- nothing.
ALTER TABLE messages ADD COLUMN media_id text;
