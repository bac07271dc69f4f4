-- An edit entry keeps the body it replaced (prev_body), so a message's
-- body as of any seq R is known: the prev_body of its first edit after R,
-- or, none, its current body. A removed member's catch-up reads the
-- messages up to their removal so (chat_message_at): a message first
-- edited after it shows what they had read, not an empty body.
--
-- Nullable, no default: adding it rewrites no row. Edits written before
-- it have none (chat_message_at falls back to the last edit before R).
-- Only edit entries carry one (chat_send_batch writes it, after the
-- edit's insert, so a plain send's statement never touches the column).
-- A recall erases it with the bodies (NOT VALID: every row so far has
-- none; new and updated rows are held to it).
ALTER TABLE message ADD COLUMN prev_body text;
ALTER TABLE message ADD CONSTRAINT message_prev_body_of_live_edit
    CHECK (prev_body IS NULL OR (kind = 'edit' AND recalled_at IS NULL)) NOT VALID;
