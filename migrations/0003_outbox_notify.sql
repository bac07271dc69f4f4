-- Wake the outbox relay (relay/) when events commit: LISTEN chat_outbox.
-- Statement-level, so a statement inserting many rows costs one notification;
-- PostgreSQL also folds identical notifications of one transaction into one
-- and delivers them only at commit, when the rows are visible.
CREATE OR REPLACE FUNCTION chat_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('chat_outbox', '');
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS outbox_notify ON outbox;
CREATE TRIGGER outbox_notify
    AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION chat_outbox_notify();
