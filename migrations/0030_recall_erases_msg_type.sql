-- A recall erases the message's type with its body (chat_send_batch, from
-- this version on): a recalled photo or file reads as a recalled message,
-- with nothing telling what it was. Messages recalled before keep theirs
-- until this erases it.
UPDATE message SET msg_type = NULL WHERE recalled_at IS NOT NULL AND msg_type IS NOT NULL;
