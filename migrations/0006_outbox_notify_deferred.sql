-- Hot write paths (group-committed sends, receipt batches) defer the relay's
-- wake-up: they set chat.defer_notify for their transaction and send
-- pg_notify('chat_outbox', '') in a transaction of its own right after
-- COMMIT. A NOTIFY inside a writing transaction holds PostgreSQL's global
-- notify lock from pre-commit through the WAL flush, so every notifying
-- commit of the database waits for the previous one's fsync: concurrent
-- batches could not share WAL flushes (measured: commits queued on
-- Lock:object). A notify-only transaction has no WAL to flush and holds the
-- lock for microseconds. Every other writer keeps the trigger's NOTIFY.
CREATE OR REPLACE FUNCTION chat_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('chat.defer_notify', true) = 'on' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('chat_outbox', '');
    RETURN NULL;
END;
$$;
